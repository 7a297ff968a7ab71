"""A pipeline compiled by the installed KFP SDK (not hand-built), for the harness's tests. No `from __future__
import annotations` here: the SDK reads its components' annotations as objects."""

SDK_MAKE = "import sys\ntext, count, path = sys.argv[1:4]\nwith open(path, 'w') as f:\n    f.write(text * int(count))\n"
SDK_SHOUT = (
    "import sys\nsource, target = sys.argv[1:3]\nwith open(source) as f, open(target, 'w') as g:\n"
    "    g.write(f.read().upper())\n"
)


def two_steps(path) -> str:
    """Two container components compiled by the installed KFP SDK (not hand-built): a parameterized producer and a
    consumer of its artifact."""
    from kfp import compiler, dsl

    @dsl.container_component
    def make(text: str, count: int, data: dsl.Output[dsl.Dataset]):
        return dsl.ContainerSpec(image="python:3.10", command=["python", "-c", SDK_MAKE], args=[text, count, data.path])

    @dsl.container_component
    def shout(data: dsl.Input[dsl.Dataset], loud: dsl.Output[dsl.Artifact]):
        return dsl.ContainerSpec(image="python:3.10", command=["python", "-c", SDK_SHOUT], args=[data.path, loud.path])

    @dsl.pipeline(name="sdk-two-steps")
    def pipeline(text: str = "hi", count: int = 2):
        made = make(text=text, count=count)
        shout(data=made.outputs["data"])

    compiler.Compiler().compile(pipeline, str(path))
    return str(path)
