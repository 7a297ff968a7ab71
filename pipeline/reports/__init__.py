"""What a run did, read back from ML Metadata, and the pages made of it: the offline run page, model cards, and
MLflow runs side by side."""
