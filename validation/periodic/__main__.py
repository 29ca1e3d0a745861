"""``python -m validation.periodic``: the periodic runner's command line."""

from validation.periodic.runner import main

raise SystemExit(main())
