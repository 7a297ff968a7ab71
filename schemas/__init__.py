"""Curated schemas and feature configs, one folder per dataset: `schemas/<dataset>/`.

Each folder holds `schema.pbtxt` (curated, what the pipeline validates against), `inferred_schema.pbtxt`
(what TFDV inferred from the data, the starting point of the curation) and `features.yaml`.
"""
