{{/* The chart's name, shortened to what a label value may hold. */}}
{{- define "koordpy.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
The name of the release's objects: the release name alone when it already says
koordpy, otherwise "<release>-koordpy".
*/}}
{{- define "koordpy.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "koordpy.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "koordpy.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels that pick the scheduler's pods; they never change over a release's life. */}}
{{- define "koordpy.selectorLabels" -}}
app.kubernetes.io/name: {{ include "koordpy.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "koordpy.labels" -}}
helm.sh/chart: {{ include "koordpy.chart" . }}
{{ include "koordpy.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/component: scheduler
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "koordpy.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "koordpy.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "koordpy.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/*
The KubeSchedulerConfiguration: schedulerConfig from the values, with the type
and the leader election the chart manages laid over it.
*/}}
{{- define "koordpy.schedulerConfig" -}}
{{- $config := deepCopy (default dict .Values.schedulerConfig) -}}
{{- $_ := set $config "apiVersion" "kubescheduler.config.k8s.io/v1" -}}
{{- $_ := set $config "kind" "KubeSchedulerConfiguration" -}}
{{- $election := dict
    "leaderElect" .Values.leaderElection.enabled
    "resourceName" .Values.leaderElection.leaseName
    "resourceNamespace" .Release.Namespace
    "leaseDuration" .Values.leaderElection.leaseDuration
    "renewDeadline" .Values.leaderElection.renewDeadline
    "retryPeriod" .Values.leaderElection.retryPeriod -}}
{{- $_ := set $config "leaderElection" $election -}}
{{- toYaml $config -}}
{{- end -}}
