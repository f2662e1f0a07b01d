from dpledger.cli import main

raise SystemExit(main())
