"""Bot core: plain Python over plain data; no network, no clock of its own."""
