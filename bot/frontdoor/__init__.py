"""Front doors: Slack (Bolt over HTTP or Socket Mode), the terminal, and later scheduler triggers."""
