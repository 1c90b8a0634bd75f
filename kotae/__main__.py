from kotae.cli import main

raise SystemExit(main())
