{{/* Chart name and version, as used by the helm.sh/chart label. */}}
{{- define "provisioner.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The chart name, or nameOverride. */}}
{{- define "provisioner.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
The resource name prefix, computed as upstream's chart does so that an upstream release upgraded
to this chart keeps its resource names: fullnameOverride, else the release name when it contains
the chart name, else <release>-<name>.
*/}}
{{- define "provisioner.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The ServiceAccount the agent runs as. */}}
{{- define "provisioner.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "provisioner.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* Labels of every object. */}}
{{- define "provisioner.labels" -}}
helm.sh/chart: {{ include "provisioner.chart" . }}
app.kubernetes.io/name: {{ include "provisioner.name" . }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* The DaemonSet's selector: the same labels as upstream's chart (the selector is immutable). */}}
{{- define "provisioner.selectorLabels" -}}
app.kubernetes.io/name: {{ include "provisioner.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/*
Name of the pod volume of a class's discovery directory: a DNS label made of the class name (a
StorageClass name may contain dots) and a hash of it, so two classes never share a volume name.
*/}}
{{- define "provisioner.classVolumeName" -}}
{{- $base := regexReplaceAll "[^a-z0-9-]+" (lower .) "-" | trunc 40 | trimSuffix "-" -}}
{{- printf "class-%s-%s" $base (sha256sum . | trunc 8) -}}
{{- end -}}

{{/* The Jobs permission mode (rbac.jobs), validated. */}}
{{- define "provisioner.jobsRbac" -}}
{{- $mode := .Values.rbac.jobs | default "always" | toString -}}
{{- if not (has $mode (list "always" "auto" "never")) -}}
{{- fail (printf "rbac.jobs must be always, auto or never, not %q" $mode) -}}
{{- end -}}
{{- if and .Values.rbac.create .Values.useJobForCleaning (eq $mode "never") -}}
{{- fail "useJobForCleaning needs the Jobs Role: set rbac.jobs to always or auto (or rbac.create=false and grant it yourself)" -}}
{{- end -}}
{{- $mode -}}
{{- end -}}

{{/* Tolerations of cleanup Job pods: jobTolerations when set, else the DaemonSet's tolerations (as upstream). */}}
{{- define "provisioner.jobTolerations" -}}
{{- if .Values.jobTolerations -}}
{{- toYaml .Values.jobTolerations -}}
{{- else if .Values.tolerations -}}
{{- toYaml .Values.tolerations -}}
{{- end -}}
{{- end -}}

{{/*
Values of upstream's chart this chart does not support fail the render instead of being dropped
silently (docs/migration-from-upstream.md), and enumerations are checked.
*/}}
{{- define "provisioner.validate" -}}
{{- if .Values.enableWindows -}}
{{- fail "enableWindows: this agent runs on Linux nodes only; keep the upstream chart for Windows nodes" -}}
{{- end -}}
{{- if .Values.additionalArgs -}}
{{- fail "additionalArgs: upstream's klog flags (--v, --stderrthreshold, ...) are not flags of this agent; use logLevel, logFormat and extraArgs (flags of `provisioner run`)" -}}
{{- end -}}
{{- if (.Values.nodeCleanupController | default dict).enabled -}}
{{- fail "nodeCleanupController: this chart's node cleanup is nodeCleanup.enabled (provisioner node-cleanup); see docs/operations.md#node-cleanup" -}}
{{- end -}}
{{- if not (has (toString .Values.logLevel) (list "debug" "info" "warn" "error")) -}}
{{- fail (printf "logLevel must be debug, info, warn or error, not %q" (toString .Values.logLevel)) -}}
{{- end -}}
{{- if not (has (toString .Values.logFormat) (list "text" "json")) -}}
{{- fail (printf "logFormat must be text or json, not %q" (toString .Values.logFormat)) -}}
{{- end -}}
{{- if not (has (toString .Values.configSource) (list "directory" "configmap")) -}}
{{- fail (printf "configSource must be directory or configmap, not %q" (toString .Values.configSource)) -}}
{{- end -}}
{{- if not (has (toString .Values.hotReload.guard) (list "refuse" "warn" "apply")) -}}
{{- fail (printf "hotReload.guard must be refuse, warn or apply, not %q" (toString .Values.hotReload.guard)) -}}
{{- end -}}
{{- if (.Values.stagedRollout | default dict).enabled -}}
{{- if not .Values.statusLease.enabled -}}
{{- fail "stagedRollout.enabled needs statusLease.enabled: the rollout controller opens each wave on what the agents publish in their status Leases" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The node cleanup Deployment's name, also its ServiceAccount's and RBAC's prefix. */}}
{{- define "provisioner.nodeCleanup.name" -}}
{{- printf "%s-node-cleanup" (include "provisioner.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Its selector labels: apart from the DaemonSet's, which must not select these pods. */}}
{{- define "provisioner.nodeCleanup.selectorLabels" -}}
app.kubernetes.io/name: {{ include "provisioner.name" . }}-node-cleanup
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* The leader Lease's name. */}}
{{- define "provisioner.nodeCleanup.leaseName" -}}
{{- .Values.nodeCleanup.leaseName | default (include "provisioner.nodeCleanup.name" .) -}}
{{- end -}}

{{/*
How the agents read their config: staged (stagedRollout.enabled: through the API, whatever
configSource says, since a mounted ConfigMap reaches every node at once and cannot be staged),
configmap (through the API) or directory (the mounted ConfigMap).
*/}}
{{- define "provisioner.configReader" -}}
{{- if (.Values.stagedRollout | default dict).enabled -}}
staged
{{- else -}}
{{- toString .Values.configSource -}}
{{- end -}}
{{- end -}}

{{/* The agents' config: the operator's ConfigMap (the chart's ConfigMap; kubectl apply writes it). */}}
{{- define "provisioner.configMapName" -}}
{{- printf "%s-config" (include "provisioner.fullname" .) -}}
{{- end -}}

{{/*
Staged rollout (stagedRollout.enabled): the two copies the rollout controller writes, named after
the operator's ConfigMap (src/core/staged-rollout/objects.ts): the stable copy, and the candidate
copy that also holds the rollout state.
*/}}
{{- define "provisioner.stagedStableName" -}}
{{- printf "%s-stable" (include "provisioner.configMapName" .) -}}
{{- end -}}
{{- define "provisioner.stagedCandidateName" -}}
{{- printf "%s-candidate" (include "provisioner.configMapName" .) -}}
{{- end -}}

{{/* The rollout controller's Deployment name, also its ServiceAccount's, RBAC's and leader Lease's. */}}
{{- define "provisioner.rolloutController.name" -}}
{{- printf "%s-rollout-controller" (include "provisioner.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Its selector labels: apart from the DaemonSet's and the node cleanup's. */}}
{{- define "provisioner.rolloutController.selectorLabels" -}}
app.kubernetes.io/name: {{ include "provisioner.name" . }}-rollout-controller
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}
