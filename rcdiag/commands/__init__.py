"""One module per CLI verb: parse options, call the library, print, choose the exit code."""
