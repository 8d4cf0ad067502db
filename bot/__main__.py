"""`python -m bot` is the `upgrade-bot` console script."""

from bot.frontdoor.cli import main

raise SystemExit(main())
