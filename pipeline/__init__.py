"""What runs the pipeline: `create_pipeline` (definition) and the typed settings it takes (config), the two
orchestrators (local, kfp), the `tfxflow` command (cli), the run page and model cards (reports) and the
commands that act on served models and data (tools). Components never import this package."""
