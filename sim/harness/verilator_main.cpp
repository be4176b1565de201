// fetta: the C++ main of native Verilator runs (sim/runner.py: build_native / run_native).
//
// Clocks a test-bench top with ports `clk` (input) and `finished` (output) until `finished` is set,
// the Verilog calls $finish, or +cycle_limit=N cycles have passed; no Python and no VPI on the
// simulated clock. Plusargs reach the Verilog ($value$plusargs). With a model built with
// --trace-fst, +trace_file=F.fst records every signal. Prints "cycles N finished F" on stdout
// (F: 1 when `finished` was set) and exits 0, or 3 on the cycle limit.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "verilated.h"
#include "Vtop.h"  // verilator --prefix Vtop
#if VM_TRACE_FST
#include "verilated_fst_c.h"
#endif

int main(int argc, char** argv) {
    auto ctx = std::make_unique<VerilatedContext>();
    ctx->commandArgs(argc, argv);
    auto top = std::make_unique<Vtop>(ctx.get());
    unsigned long long limit = 0;
    const char* arg = ctx->commandArgsPlusMatch("cycle_limit=");
    if (arg && *arg) limit = std::strtoull(arg + std::strlen("+cycle_limit="), nullptr, 10);
#if VM_TRACE_FST
    std::unique_ptr<VerilatedFstC> fst;
    const char* tf = ctx->commandArgsPlusMatch("trace_file=");
    if (tf && *tf) {
        ctx->traceEverOn(true);
        fst = std::make_unique<VerilatedFstC>();
        top->trace(fst.get(), 99);
        fst->open(tf + std::strlen("+trace_file="));
    }
#endif
    // one half of a clock period: drive clk, settle, record, advance time
    auto half = [&](int level) {
        top->clk = level;
        top->eval();
#if VM_TRACE_FST
        if (fst) fst->dump(ctx->time());
#endif
        ctx->timeInc(5);
    };
    unsigned long long n = 0;
    top->clk = 0;
    top->eval();
    while (!ctx->gotFinish() && !top->finished && (limit == 0 || n < limit)) {
        half(1);
        half(0);
        ++n;
    }
    const bool finished = top->finished;
    top->final();
#if VM_TRACE_FST
    if (fst) fst->close();
#endif
    std::printf("cycles %llu finished %d\n", n, finished ? 1 : 0);
    return (limit != 0 && n >= limit && !finished) ? 3 : 0;
}
