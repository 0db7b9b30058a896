{{/*
Names are fixed, as in deploy/: the controller's Lease, the ClusterRole and the metrics
Service are found by these names, and one installation per cluster is the rule.
*/}}

{{/* The labels that select the controller's Pods: the same as deploy/, so a Deployment
applied from deploy/ can be taken over by the chart (a selector is immutable). */}}
{{- define "fleet-mirror.selectorLabels" -}}
app.kubernetes.io/name: fleet-mirror
app.kubernetes.io/component: controller
{{- end }}

{{/* Every object's labels: deploy/kustomization.yaml's part-of, and Helm's own. */}}
{{- define "fleet-mirror.labels" -}}
app.kubernetes.io/part-of: fleet-mirror
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end }}

{{/* The controller's ServiceAccount as a RoleBinding subject. */}}
{{- define "fleet-mirror.subject" -}}
- kind: ServiceAccount
  name: fleet-mirror
  namespace: {{ .Release.Namespace }}
{{- end }}

{{/* Combinations the schema cannot express, refused with the reason. */}}
{{- define "fleet-mirror.validate" -}}
{{- if and (gt (int .Values.replicas) 1) (not .Values.leaderElection.enabled) }}
{{- fail (printf "replicas: %d replicas need leaderElection.enabled (without a Lease every replica would write the same mirrors)" (int .Values.replicas)) }}
{{- end }}
{{- if and (gt (int .Values.sharding.shards) 1) (not .Values.leaderElection.enabled) }}
{{- fail "sharding.shards > 1 needs leaderElection.enabled (each shard is held through a Lease)" }}
{{- end }}
{{- if and .Values.dryRun .Values.leaderElection.enabled }}
{{- fail "dryRun needs leaderElection.enabled=false (and replicas: 1): a dry run takes no Lease, a Lease is a write" }}
{{- end }}
{{- if and .Values.podDisruptionBudget.enabled (ge (int .Values.podDisruptionBudget.minAvailable) (int .Values.replicas)) (gt (int .Values.replicas) 0) }}
{{- fail (printf "podDisruptionBudget.minAvailable: %d of %d replicas would block every voluntary disruption (node drain)" (int .Values.podDisruptionBudget.minAvailable) (int .Values.replicas)) }}
{{- end }}
{{- end }}

{{/* The Lease layout of the release, "<lease id>/<layout>" (the controller's
src/core/lease-names.ts: "leader", or "s<S>" sharded), or "none" without leader
election. Replicas of two layouts never write at once (a replica takes no Lease while
another layout's are live); this annotation lets the next upgrade see that it changes. */}}
{{- define "fleet-mirror.leaseLayout" -}}
{{- if not .Values.leaderElection.enabled -}}
none
{{- else -}}
{{ .Values.leaderElection.leaseName | default "fleet-mirror" }}/{{ if gt (int .Values.sharding.shards) 1 }}s{{ int .Values.sharding.shards }}{{ else }}leader{{ end }}
{{- end -}}
{{- end }}

{{/* The Deployment's strategy. RollingUpdate (a surge Pod before an old one stops) while
the layout stays the same. Recreate (every old Pod gone before a new one starts) when an
upgrade changes it, as read from the live Deployment's annotation (none there: a release
of an earlier chart, whose sharded Leases had other names), and always without a Lease
(a lone writer must not overlap its successor). Without a cluster to read (`helm
template`) it renders RollingUpdate: the controller then keeps the layouts apart itself,
the new Pods waiting, ready and writing nothing, until the old ones are gone. */}}
{{- define "fleet-mirror.strategy" -}}
{{- $layout := include "fleet-mirror.leaseLayout" . -}}
{{- $live := lookup "apps/v1" "Deployment" .Release.Namespace "fleet-mirror" -}}
{{- $before := "" -}}
{{- if $live }}{{ $before = dig "metadata" "annotations" "mirror.linkerd.io/lease-layout" "" $live }}{{ end -}}
{{- if or (eq $layout "none") (and $live (ne $before $layout)) -}}
type: Recreate
{{- else -}}
type: RollingUpdate
rollingUpdate:
  maxSurge: 1
  maxUnavailable: 0
{{- end -}}
{{- end }}
