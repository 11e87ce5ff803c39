"""Models: the providers file, the registry, the factory and cache of built models, and each
provider's request shapes (`wire/`)."""
