"""Another data set, with its own schema and feature config, goes through the pipeline with no code change."""

import csv
import os

import numpy as np
import pytest
import tensorflow as tf

from tests import helpers

pytestmark = pytest.mark.e2e

SCHEMA = """
feature { name: "applicant_id" type: INT value_count { min: 1 max: 1 } presence { min_fraction: 1.0 } }
feature { name: "age" type: INT value_count { min: 1 max: 1 } int_domain { min: 18 max: 100 } }
feature { name: "income" type: FLOAT value_count { min: 1 max: 1 } float_domain { min: 0 } }
feature { name: "city" type: BYTES value_count { max: 1 } }
feature { name: "region_code" type: INT value_count { min: 1 max: 1 } }
feature { name: "score" type: FLOAT value_count { min: 1 max: 1 } }
feature { name: "approved" type: BYTES value_count { min: 1 max: 1 } presence { min_fraction: 1.0 }
          not_in_environment: "SERVING" }
default_environment: "TRAINING"
default_environment: "SERVING"
"""

FEATURES = """
label: {name: is_approved, column: approved, positive_values: ["yes"]}
numeric: [age, income]
categorical: [city, region_code]
bucketized: [score]
num_buckets: 4
"""


def _write_loans(folder, n=800):
    rng = np.random.default_rng(7)
    os.makedirs(folder)
    with open(os.path.join(folder, "loans.csv"), "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["applicant_id", "age", "income", "city", "region_code", "score", "approved"])
        for i in range(n):
            income = float(rng.uniform(10_000, 120_000))
            city = "" if i % 17 == 0 else str(rng.choice(["Lyon", "Porto", "Graz", "Turku"]))
            approved = "yes" if (income > 55_000) != (rng.uniform() < 0.05) else "no"
            writer.writerow(
                [
                    i,
                    int(rng.integers(18, 90)),
                    round(income, 2),
                    city,
                    int(rng.integers(1, 5)),
                    round(float(rng.normal()), 3),
                    approved,
                ]
            )
    return folder


def test_a_csv_of_another_shape_is_trained_and_pushed(tmp_path):
    data = _write_loans(str(tmp_path / "data"))
    (tmp_path / "schema.pbtxt").write_text(SCHEMA)
    (tmp_path / "features.yaml").write_text(FEATURES)
    home = str(tmp_path / "home")
    result = helpers.run_cli(
        "run",
        "--home",
        home,
        "--dataset",
        "loans",
        "--data-root",
        data,
        "--schema",
        str(tmp_path / "schema.pbtxt"),
        "--feature-config",
        str(tmp_path / "features.yaml"),
        "--train-steps",
        "150",
        "--batch-size",
        "32",
        "--eval-every-steps",
        "75",
        "--tracking",
        "off",  # what is tracked is another module's; this one is about the data's shape
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "pipeline tfxflow-loans" in result.stdout

    versions = helpers.pushed_versions(os.path.join(home, "serving"), "loans")
    assert len(versions) == 1
    loaded = tf.saved_model.load(os.path.join(home, "serving", "loans", versions[0]))
    rich = {"applicant_id": "1", "age": "40", "income": "110000", "city": "Lyon", "region_code": "2", "score": "0.1"}
    poor = dict(rich, income="15000")
    unseen = dict(rich, city="Atlantis")  # a category the vocabulary never saw
    examples = helpers.serialize_examples([rich, poor, unseen], str(tmp_path / "schema.pbtxt"))
    probabilities = loaded.signatures["serving_default"](examples=tf.constant(examples))["probabilities"].numpy()
    assert np.all(np.isfinite(probabilities))
    # The label follows income: the model must have learnt that much.
    assert probabilities[0, 0] > 0.5 > probabilities[1, 0]
