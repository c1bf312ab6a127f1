from kb.cli import main

raise SystemExit(main())
