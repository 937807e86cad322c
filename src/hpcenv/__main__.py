from hpcenv.cli import main

raise SystemExit(main())
