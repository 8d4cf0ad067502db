"""Front doors, where work starts: Slack (`slack`: Bolt over HTTP or Socket Mode), the terminal
(`cli`, with `serve` for `upgrade-bot run`), and the triggers (`triggers`: every timer)."""
