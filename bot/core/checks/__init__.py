"""Pre-flight checks (issue 14): findings, the checks themselves, and the data they rely on."""
