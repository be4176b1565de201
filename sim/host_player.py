"""The host of the RTL runs, played in Verilog: no Python on the simulated clock.

A run of the accelerator on the RTL is a list of *jobs* (:mod:`sim.rtl`): host writes of
unified / accumulation rows, instruction pushes, a start on one ping-pong half, the wait for
``done``, host reads. :func:`player_verilog` emits a test-bench top ``fetta_host`` that instantiates
the accelerator and plays such a list from a text file through the accelerator's host port, one
command per clock cycle (``$fscanf``), and writes what it reads and each run's status to another
file (``$fwrite``). The simulator then runs at its own speed from the first cycle to the last; the
cocotb bench (:mod:`sim.benches.host_bench`) only drives the clock and waits for ``finished``.

The port protocol is the accelerator's (:class:`hdl.top.Fetta`): every input is registered by the
player on a rising edge and sampled by the accelerator on the next one; a read's data is valid one
cycle after ``host_re``; after ``start`` the player lets one edge pass (``done`` of the previous run
clears there) and then waits for ``done``.

The accelerator's DMA engine (``m_axi_*``) is answered by ``fetta_axi_ram`` (:func:`axi_ram_verilog`),
an AXI4 subordinate RAM of :data:`DRAM_BYTES` bytes that is always ready, returns a read burst's
beats back to back from ``dram_latency`` cycles after its AR handshake and a write burst's B the
cycle after its last W beat: the DRAM :func:`gen.design.control.dma_cycles` counts with. It starts
as zeros, or as ``+dram_in=FILE`` (``$readmemh``: one beat per line, lowest address first) and is
written to ``+dram_out=FILE`` when the player ends.

Commands (one per line, hex fields): ``1 sel half addr data`` write a row, ``2 0 0 0 word`` push an
instruction word, ``3 0 0 0 0`` clear the instruction memory, ``4 half limit 0 0`` start and wait
for ``done`` (at most ``limit`` cycles), ``5 sel half addr 0`` read a row, ``6 0 0 0 0`` end.
Output lines: ``D cycles error pc host_err dma_error`` per run, ``R data`` per row read, ``T`` on a timeout.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import hdl
from sim.emulator import DRAM_BYTES as EMU_DRAM_BYTES

#: the test-bench top module
TOP = "fetta_host"
#: the cycles a job's run may take unless it says (``limit``)
DEFAULT_LIMIT = 1_000_000
#: bytes of the bench's DRAM (``fetta_axi_ram``); the emulator's default DRAM has as many
DRAM_BYTES = EMU_DRAM_BYTES


def port_widths(verilog: str, module: str) -> dict[str, int]:
    """Width of every port of ``module`` as declared in the emitted ``verilog``."""
    body = re.search(rf"^module {re.escape(module)}\(.*?^endmodule", verilog, re.M | re.S)
    if body is None:
        raise ValueError(f"module {module} is not in the Verilog")
    return {m.group(3): int(m.group(2) or 0) + 1
            for m in re.finditer(r"^\s*(input|output)\s+(?:wire\s+|reg\s+)?(?:\[(\d+):0\]\s+)?(\w+)\s*;",
                                 body.group(0), re.M)}


def axi_ram_verilog(data_bits: int, latency: int, num: int = 1, den: int = 1, dram_bytes: int = DRAM_BYTES) -> str:
    """Verilog of ``fetta_axi_ram`` (module docstring): ``dram_bytes`` (a power of two; default
    :data:`DRAM_BYTES`) of ``data_bits``-wide beats,
    read latency ``latency``, at most ``num / den`` beats per cycle (the credit of
    :func:`gen.design.control.dram_paced`); up to 32 bursts queued per direction; write strobes are
    ignored (the DMA engine writes whole beats)."""
    if not 1 <= num <= den <= 255:
        raise ValueError(f"the DRAM's rate must be 1 <= num <= den <= 255 beats per cycle, got {num}/{den}")
    if dram_bytes < DRAM_BYTES or dram_bytes & (dram_bytes - 1) or dram_bytes > 1 << 32:
        raise ValueError(f"the bench's DRAM must be a power of two from {DRAM_BYTES} to 4 GiB bytes, got {dram_bytes}")
    lg = (data_bits // 8).bit_length() - 1
    depth = dram_bytes >> lg
    iw = max(1, depth.bit_length() - 1)
    return f"""// AXI4 subordinate RAM of the host player (sim/host_player.py)
module fetta_axi_ram (
  input wire clk, input wire dump,
  input wire [31:0] awaddr, input wire [7:0] awlen, input wire awvalid, output wire awready,
  input wire [{data_bits - 1}:0] wdata, input wire wlast, input wire wvalid, output wire wready,
  output wire bvalid, input wire bready, output wire [1:0] bresp, output wire bid,
  input wire [31:0] araddr, input wire [7:0] arlen, input wire arvalid, output wire arready,
  output wire [{data_bits - 1}:0] rdata, output wire rlast, output wire rvalid, input wire rready,
  output wire [1:0] rresp, output wire rid);
  reg [{data_bits - 1}:0] mem [0:{depth - 1}];
  reg [63:0] now = 64'd0;
  // read bursts: next beat, beats left, first cycle; write bursts: next beat; B: first cycle
  reg [{iw - 1}:0] ar_beat [0:31];
  reg [8:0] ar_left [0:31];
  reg [63:0] ar_time [0:31];
  reg [{iw - 1}:0] aw_beat [0:31];
  reg [63:0] b_time [0:31];
  reg [4:0] ar_head = 5'd0, ar_tail = 5'd0, aw_head = 5'd0, aw_tail = 5'd0, b_head = 5'd0, b_tail = 5'd0;
  reg [8*4096-1:0] path;
  integer i;
  // bandwidth: a beat moves only with credit >= DEN; NUM credit per cycle, up to one beat carried
  localparam [9:0] NUM = 10'd{num}, DEN = 10'd{den}, CAP = 10'd{den + num - 1};
  reg [9:0] credit = 10'd{den};
  wire idle = (ar_head == ar_tail) && (aw_head == aw_tail);
  wire paid = credit >= DEN;
  wire beat = (rvalid && rready) || (wvalid && wready && aw_head != aw_tail);
  wire [9:0] earned = credit + NUM - (beat ? DEN : 10'd0);
  assign arready = 1'b1;
  assign awready = 1'b1;
  assign wready = paid;
  assign rvalid = (ar_head != ar_tail) && (ar_time[ar_head] <= now) && paid;
  assign rdata = mem[ar_beat[ar_head]];
  assign rlast = ar_left[ar_head] == 9'd1;
  assign bvalid = (b_head != b_tail) && (b_time[b_head] <= now);
  assign bresp = 2'd0;
  assign rresp = 2'd0;
  assign bid = 1'b0;
  assign rid = 1'b0;
  initial begin
    for (i = 0; i < {depth}; i = i + 1)
      mem[i] = {data_bits}'d0;
    if ($value$plusargs("dram_in=%s", path))
      $readmemh(path, mem);
  end
  always @(posedge clk) begin
    now <= now + 64'd1;
    credit <= idle ? DEN : (earned > CAP ? CAP : earned);
    if (arvalid) begin
      ar_beat[ar_tail] <= araddr[{lg + iw - 1}:{lg}];
      ar_left[ar_tail] <= {{1'b0, arlen}} + 9'd1;
      ar_time[ar_tail] <= now + 64'd{latency};
      ar_tail <= ar_tail + 5'd1;
    end
    if (rvalid && rready) begin
      if (ar_left[ar_head] == 9'd1)
        ar_head <= ar_head + 5'd1;
      else begin
        ar_beat[ar_head] <= ar_beat[ar_head] + {iw}'d1;
        ar_left[ar_head] <= ar_left[ar_head] - 9'd1;
      end
    end
    if (awvalid) begin
      aw_beat[aw_tail] <= awaddr[{lg + iw - 1}:{lg}];
      aw_tail <= aw_tail + 5'd1;
    end
    if (wvalid && wready && aw_head != aw_tail) begin
      mem[aw_beat[aw_head]] <= wdata;
      if (wlast) begin
        aw_head <= aw_head + 5'd1;
        b_time[b_tail] <= now + 64'd1;
        b_tail <= b_tail + 5'd1;
      end else
        aw_beat[aw_head] <= aw_beat[aw_head] + {iw}'d1;
    end
    if (bvalid && bready)
      b_head <= b_head + 5'd1;
    if (dump && $value$plusargs("dram_out=%s", path))
      $writememh(path, mem);
  end
endmodule
"""


def player_verilog(design: str, dram_latency: int = 8, dram_rate: tuple[int, int] = (1, 1),
                   dram_bytes: int = DRAM_BYTES) -> str:
    """Verilog of the ``fetta_host`` test bench for the accelerator in ``design`` (the emitted Verilog
    of :func:`hdl.module_name` ``("fetta")``; the bench goes into the same compilation) and of its
    DRAM (:func:`axi_ram_verilog`: read latency ``dram_latency`` and rate ``dram_rate``, the
    configuration's; ``dram_bytes``). Its
    registers take the widths of the accelerator's ports."""
    w = port_widths(design, hdl.module_name("fetta"))
    dw = max(w["host_wdata"], w["instr"])
    axi = [name.removeprefix("m_axi_") for name in w if name.startswith("m_axi_")]
    axi_wires = "\n".join(f"  wire [{w['m_axi_' + n] - 1}:0] axi_{n};" for n in sorted(axi))
    used = ("awaddr", "awlen", "awvalid", "awready", "wdata", "wlast", "wvalid", "wready", "bvalid", "bready",
            "bresp", "bid", "araddr", "arlen", "arvalid", "arready", "rdata", "rlast", "rvalid", "rready", "rresp", "rid")
    return axi_ram_verilog(w["m_axi_wdata"], dram_latency, *dram_rate, dram_bytes) + f"""// fetta host player (sim/host_player.py): plays a job file through the host port
module {TOP} (input wire clk, output reg finished);
  reg rst = 1'b1;
  reg [1:0] reset_cycles = 2'd0;
  reg host_sel = 1'b0, host_half = 1'b0, host_we = 1'b0, host_re = 1'b0;
  reg instr_push = 1'b0, instr_clear = 1'b0, start = 1'b0, run_half = 1'b0;
  reg [{w["host_addr"] - 1}:0] host_addr = 0;
  reg [{w["host_wdata"] - 1}:0] host_wdata = 0;
  reg [{w["instr"] - 1}:0] instr = 0;
  wire [{w["host_wdata"] - 1}:0] host_rdata;
  wire host_rvalid, busy, done, host_err;
  wire [{w["error"] - 1}:0] error;
  wire [{w["pc"] - 1}:0] pc;
  wire [{w["cycles"] - 1}:0] cycles;
  wire dma_error, dma_done;
{axi_wires}
  reg dump = 1'b0;
  fetta_axi_ram dram ({", ".join(f".{n}(axi_{n})" for n in used)}, .clk(clk), .dump(dump));
  {hdl.module_name("fetta")} dut (
    .clk(clk), .rst(rst), .host_sel(host_sel), .host_half(host_half), .host_addr(host_addr),
    .host_we(host_we), .host_re(host_re), .host_wdata(host_wdata), .host_rdata(host_rdata),
    .host_rvalid(host_rvalid), .instr(instr), .instr_push(instr_push), .instr_clear(instr_clear),
    .start(start), .run_half(run_half), .busy(busy), .done(done), .error(error), .pc(pc),
    .cycles(cycles), .host_err(host_err), .dma_error(dma_error), .dma_done(dma_done),
    {", ".join(f".m_axi_{n}(axi_{n})" for n in sorted(axi))});

  integer fin, fout, got;
  reg [8*4096-1:0] path_in, path_out;
  reg [3:0] op;
  reg [31:0] f1, f2, f3, waited, limit;
  reg [{dw - 1}:0] data;
  // 0: next command, 1: the edge after start, 2: wait for done, 3: the edge after host_re,
  // 4: read data, 5: finished
  reg [2:0] state = 3'd0;

  initial begin
    finished = 1'b0;
    if (!$value$plusargs("host_in=%s", path_in) || !$value$plusargs("host_out=%s", path_out)) begin
      $display("fetta_host: +host_in=FILE and +host_out=FILE are required");
      $finish;
    end
    fin = $fopen(path_in, "r");
    fout = $fopen(path_out, "w");
    if (fin == 0 || fout == 0) begin
      $display("fetta_host: cannot open the job files");
      $finish;
    end
  end

  always @(posedge clk) begin
    host_we <= 1'b0;
    host_re <= 1'b0;
    instr_push <= 1'b0;
    instr_clear <= 1'b0;
    start <= 1'b0;
    if (reset_cycles != 2'd2) begin
      reset_cycles <= reset_cycles + 2'd1;
      rst <= reset_cycles == 2'd0;
    end else begin
      case (state)
        3'd0: begin
          got = $fscanf(fin, "%h %h %h %h %h\\n", op, f1, f2, f3, data);
          if (got != 5) begin
            $display("fetta_host: bad command line (%0d fields)", got);
            op = 4'd6;
          end
          case (op)
            4'd1: begin host_sel <= f1[0]; host_half <= f2[0]; host_addr <= f3; host_wdata <= data[{w["host_wdata"] - 1}:0]; host_we <= 1'b1; end
            4'd2: begin instr <= data[{w["instr"] - 1}:0]; instr_push <= 1'b1; end
            4'd3: instr_clear <= 1'b1;
            4'd4: begin run_half <= f1[0]; start <= 1'b1; limit <= f2; waited <= 0; state <= 3'd1; end
            4'd5: begin host_sel <= f1[0]; host_half <= f2[0]; host_addr <= f3; host_re <= 1'b1; state <= 3'd3; end
            default: begin $fclose(fout); dump <= 1'b1; state <= 3'd6; end
          endcase
        end
        3'd1: state <= 3'd2;
        3'd6: begin finished <= 1'b1; state <= 3'd5; end
        3'd2: begin
          if (done) begin
            $fwrite(fout, "D %h %h %h %h %h\\n", cycles, error, pc, host_err, dma_error);
            state <= 3'd0;
          end else if (waited == limit) begin
            $fwrite(fout, "T\\n");
            $fclose(fout);
            finished <= 1'b1;
            state <= 3'd5;
          end else
            waited <= waited + 1;
        end
        3'd3: state <= 3'd4;
        3'd4: begin
          if (host_rvalid)
            $fwrite(fout, "R %h\\n", host_rdata);
          else
            $fwrite(fout, "X\\n");
          state <= 3'd0;
        end
        default: ;
      endcase
    end
  end
endmodule
"""


def _pack(rows: np.ndarray, bits: int) -> list[int]:
    """Rows ``[n, lanes]`` of bit patterns as one integer each, lane 0 in the low bits."""
    rows = np.asarray(rows, np.uint64).reshape(len(rows), -1)
    shifts = [i * bits for i in range(rows.shape[1])]
    return [sum(int(x) << s for x, s in zip(r, shifts)) for r in rows]


def _unpack(vals: list[int], lanes: int, bits: int) -> np.ndarray:
    mask = (1 << bits) - 1
    return np.array([[(v >> (i * bits)) & mask for i in range(lanes)] for v in vals], np.uint64).reshape(-1, lanes)


def write_script(path: Path, config, jobs) -> int:
    """Write the command file of ``jobs`` (:mod:`sim.rtl`) for the player; returns its commands."""
    eb, ab = config.elem_bits, config.acc_bits
    L = config.lanes
    lines = []
    for job in jobs:
        for half, addr, rows in job.get("uwrites", []):
            rows = np.asarray(rows, np.uint64).reshape(-1, L)
            lines += [f"1 0 {half:x} {addr + i:x} {v:x}" for i, v in enumerate(_pack(rows, eb))]
        for addr, rows in job.get("awrites", []):
            rows = np.asarray(rows, np.uint64).reshape(-1, L)
            lines += [f"1 1 0 {addr + i:x} {v:x}" for i, v in enumerate(_pack(rows, ab))]
        lines.append("3 0 0 0 0")
        lines += [f"2 0 0 0 {int(w):x}" for w in job["prog"]]
        lines.append(f"4 {job.get('half', 0):x} {job.get('limit', DEFAULT_LIMIT):x} 0 0")
        for half, addr, n in job.get("ureads", []):
            lines += [f"5 0 {half:x} {a:x} 0" for a in range(addr, addr + n)]
        for addr, n in job.get("areads", []):
            lines += [f"5 1 0 {a:x} 0" for a in range(addr, addr + n)]
    lines.append("6 0 0 0 0")
    Path(path).write_text("\n".join(lines) + "\n")
    return len(lines)


def read_output(path: Path, config, jobs) -> dict:
    """The player's output file as the dict of the cocotb bench: per job ``j{j}_cycles``, ``_error``,
    ``_pc``, ``_host_err``, ``_urd`` (unified rows read), ``_ard`` (accumulation rows read)."""
    L = config.lanes
    lines = Path(path).read_text().split("\n")
    pos = 0
    out = {}

    def take(kind):
        nonlocal pos
        if pos >= len(lines) or not lines[pos].startswith(kind):
            seen = lines[pos] if pos < len(lines) else "end of file"
            raise ValueError(f"host player output line {pos + 1}: expected {kind!r}, got {seen!r}")
        pos += 1
        return [int(x, 16) for x in lines[pos - 1].split()[1:]]

    for j, job in enumerate(jobs):
        p = f"j{j}_"
        cycles, error, pc, host_err, dma_error = take("D")
        out.update({p + "cycles": cycles, p + "error": error, p + "pc": pc, p + "host_err": host_err,
                    p + "dma_error": dma_error})
        for key, reads, bits in (("urd", [n for _, _, n in job.get("ureads", [])], config.elem_bits),
                                 ("ard", [n for _, n in job.get("areads", [])], config.acc_bits)):
            vals = [take("R")[0] for _ in range(sum(reads))]
            out[p + key] = _unpack(vals, L, bits) if vals else np.zeros((0, L), np.uint64)
    return out


def write_dram(path: Path, dram: np.ndarray, beat_bytes: int) -> None:
    """``dram`` (bytes, at most the bench's DRAM) as a ``$readmemh`` file of ``beat_bytes``-byte beats."""
    data = np.zeros(-(-len(dram) // beat_bytes) * beat_bytes, np.uint8)
    data[:len(dram)] = dram
    beats = data.reshape(-1, beat_bytes)[:, ::-1]          # little-endian beats, most significant byte first
    Path(path).write_text("\n".join(b.tobytes().hex() for b in beats) + "\n")


def read_dram(path: Path, beat_bytes: int) -> np.ndarray:
    """The ``$writememh`` file of the bench's DRAM as bytes (all of it)."""
    beats = [line.split("//")[0].strip() for line in Path(path).read_text().splitlines()]
    beats = [b for b in beats if b and not b.startswith("@")]
    raw = bytes.fromhex("".join(b.replace("x", "0").replace("X", "0").zfill(2 * beat_bytes) for b in beats))
    return np.frombuffer(raw, np.uint8).reshape(-1, beat_bytes)[:, ::-1].reshape(-1).copy()


__all__ = ["TOP", "DRAM_BYTES", "player_verilog", "axi_ram_verilog", "write_script", "read_output", "write_dram",
           "read_dram"]
