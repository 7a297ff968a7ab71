"""Commands that act on what runs left: drafting a schema for new data, accepting a run's data as the drift
baseline, and rolling a served model back."""
