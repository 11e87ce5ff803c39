"""Users' files: storage under `<data_dir>/users/<id>/`, containment, sniffing and serving."""
