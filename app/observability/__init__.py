"""What an operator sees of a running hearth: metrics, traces and logs."""
