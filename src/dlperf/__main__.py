from dlperf.cli.main import main

raise SystemExit(main())
