"""One module per framework's log format; each exposes FORMATS, a tuple of LogFormat."""
