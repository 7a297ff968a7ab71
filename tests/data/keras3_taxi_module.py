"""A TFX module file whose model is Keras 3 (`import keras`), as TFX 1.21 supports for users' modules: Google's own
taxi preprocessing_fn (tfx/examples/chicago_taxi_pipeline), and a run_fn that trains a Keras 3 model on its
outputs and exports it as Google's module does (a serving signature of tf.Examples through the Transform graph,
and `transform_features` for TFMA). The project's built-in models stay tf-keras.

A Keras 3 model saved by `tf.saved_model.save` as an attribute loads in TensorFlow 2 but not in TF Serving's loader
("Could not find variable dense/kernel": the SavedModel holds Keras 3's variable wrappers, not the tf.Variables its
functions read), which the serving check refuses; the TensorFlow variables are tracked here as well. Keras 3's own
`ExportArchive` saves the variables but not the Transform graph's tables ("Table not initialized" in TFMA)."""

import keras
import tensorflow as tf
import tensorflow_transform as tft
from tfx.examples.chicago_taxi_pipeline.taxi_utils_native_keras import preprocessing_fn  # noqa: F401
from tfx_bsl.tfxio import dataset_options

LABEL = "tips"
FLOATS = ["trip_miles_xf", "fare_xf", "trip_seconds_xf"]  # z-scored by the preprocessing_fn
HOUR = "trip_start_hour_xf"  # 0..23
PAYMENT = "payment_type_xf"  # a vocabulary index: 1,000 terms at most and 10 out-of-vocabulary buckets


def _dataset(files, data_accessor, transform_output, batch):
    return data_accessor.tf_dataset_factory(
        files,
        dataset_options.TensorFlowDatasetOptions(batch_size=batch, label_key=LABEL + "_xf"),
        transform_output.transformed_metadata.schema,
    ).repeat()


def _model() -> "keras.Model":
    inputs = {name: keras.Input(shape=(1,), name=name, dtype="float32") for name in FLOATS}
    inputs[HOUR] = keras.Input(shape=(1,), name=HOUR, dtype="int64")
    inputs[PAYMENT] = keras.Input(shape=(1,), name=PAYMENT, dtype="int64")
    hour = keras.layers.CategoryEncoding(num_tokens=24, output_mode="one_hot")(inputs[HOUR])
    payment = keras.layers.CategoryEncoding(num_tokens=1010, output_mode="one_hot")(inputs[PAYMENT])
    x = keras.layers.Concatenate()([inputs[name] for name in FLOATS] + [hour, payment])
    x = keras.layers.Dense(32, activation="relu")(x)
    output = keras.layers.Dense(1, activation="sigmoid")(x)
    model = keras.Model(inputs, output)
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss="binary_crossentropy", metrics=["binary_accuracy"])
    return model


def _inputs(features):
    return {name: tf.reshape(features[name], [-1, 1]) for name in FLOATS + [HOUR, PAYMENT]}


class _Served(tf.Module):
    """The Keras 3 model and the Transform graph, with the signatures Google's taxi module exports."""

    def __init__(self, model, transform_output):
        super().__init__()
        self.model = model
        self.model_variables = [variable.value for variable in model.variables]  # the tf.Variables themselves
        self.transform_output = transform_output
        self.tft_layer = transform_output.transform_features_layer()

    @tf.function(input_signature=[tf.TensorSpec(shape=[None], dtype=tf.string, name="examples")])
    def serve(self, examples):
        spec = self.transform_output.raw_feature_spec()
        spec.pop(LABEL)
        transformed = self.tft_layer(tf.io.parse_example(examples, spec))
        return {"outputs": self.model(_inputs(transformed))}

    @tf.function(input_signature=[tf.TensorSpec(shape=[None], dtype=tf.string, name="examples")])
    def transform_features(self, examples):
        return self.tft_layer(tf.io.parse_example(examples, self.transform_output.raw_feature_spec()))


def run_fn(fn_args):
    if not keras.__version__.startswith("3."):
        raise RuntimeError(f"this module is for Keras 3; keras {keras.__version__} is installed")
    transform_output = tft.TFTransformOutput(fn_args.transform_output)
    train = _dataset(fn_args.train_files, fn_args.data_accessor, transform_output, 64)
    evaluation = _dataset(fn_args.eval_files, fn_args.data_accessor, transform_output, 64)
    model = _model()
    model.fit(
        train.map(lambda features, label: (_inputs(features), label)),
        steps_per_epoch=fn_args.train_steps,
        validation_data=evaluation.map(lambda features, label: (_inputs(features), label)),
        validation_steps=fn_args.eval_steps,
    )
    served = _Served(model, transform_output)
    tf.saved_model.save(
        served,
        fn_args.serving_model_dir,
        signatures={"serving_default": served.serve, "transform_features": served.transform_features},
    )
