"""The pure compute core: functions of log-prob arrays, no I/O and no printing."""
