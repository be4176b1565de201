from gen.cli import main

raise SystemExit(main())
