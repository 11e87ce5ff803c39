"""Models: the providers file, the model registry, and (later) model factories."""
