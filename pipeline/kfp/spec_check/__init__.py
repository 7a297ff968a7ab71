"""Offline admission check of a compiled KFP pipeline spec against the open-source KFP 2.x backend.

`tfxflow kubeflow compile` writes a PipelineSpec (and a Kubernetes platform spec). Uploading it parses it and
checks little more than its schema version and name; the backend compiles it into an Argo workflow when a run or
recurring run is created, and its driver and launcher resolve inputs, pod settings and placeholders when each task
starts. This module applies those rules offline, so a
spec the backend would refuse, fail at run time, or silently mishandle is caught before it reaches a cluster.

Every rule cites its source in kubeflow/pipelines (snapshot 7b70c7b, paths under backend/src/ unless said
otherwise); rules on names come from Argo Workflows (workflow/validate/validate.go, which the API server runs on
the compiled workflow in resource/resource_manager.go CreateRun) or from Kubernetes pod validation (the pod the
driver patches is refused when it is created). When a problem bites is said in its message:
- upload: apiserver/template/v2_template.go NewV2SpecTemplate;
- run creation: v2_template.go RunWorkflow/ScheduledWorkflow -> v2/compiler/argocompiler Compile -> Argo validation;
- task start: v2/driver, v2/component (launcher), Kubernetes.

Not checkable offline: run-time parameter values, the pipeline root the run really uses (the backend ignores
`defaultPipelineRoot`: v2/driver/root_dag.go takes the run's runtimeConfig.pipelineRoot, else the namespace's
kfp-launcher ConfigMap, else minio://mlpipeline/v2/artifacts, v2/config/env.go), object-store credentials, and
whether images, secrets, PVCs, node labels and GPUs exist in the cluster.

The rules, by what they read: the spec as a whole (structure), each DAG's tasks and their inputs (dags), each
executor (executors), the Kubernetes platform spec (k8s_platform); what they share (rules); the check and its
report (verdict).
"""

from tfxflow.pipeline.kfp.spec_check.rules import Problem
from tfxflow.pipeline.kfp.spec_check.verdict import check_file, check_spec, format_problems

__all__ = ["Problem", "check_file", "check_spec", "format_problems"]
