{{/*
The release's base name: the runner StatefulSet's name and the prefix of everything else. Its
pods are the runner shards (<name>-<n>), and a shard name has at most 23 characters, so the
name is cut to 19.
*/}}
{{- define "conch.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 19 | trimSuffix "-" -}}
{{- else if contains (default .Chart.Name .Values.nameOverride) .Release.Name -}}
{{- .Release.Name | trunc 19 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name (default .Chart.Name .Values.nameOverride) | trunc 19 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* Labels every object carries. */}}
{{- define "conch.labels" -}}
app.kubernetes.io/name: {{ default .Chart.Name .Values.nameOverride }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* Selector labels of the runner pods. */}}
{{- define "conch.runnerSelector" -}}
app.kubernetes.io/name: {{ default .Chart.Name .Values.nameOverride }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: runner
{{- end -}}

{{/* Selector labels of the router pods. */}}
{{- define "conch.routerSelector" -}}
app.kubernetes.io/name: {{ default .Chart.Name .Values.nameOverride }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: router
{{- end -}}

{{/* The headless Service that gives each runner pod its DNS name. */}}
{{- define "conch.headless" -}}
{{- printf "%s-headless" (include "conch.fullname" .) -}}
{{- end -}}

{{/* The Secret that holds the API key. */}}
{{- define "conch.apiKeySecret" -}}
{{- if .Values.apiKey.existingSecret -}}
{{- .Values.apiKey.existingSecret -}}
{{- else -}}
{{- printf "%s-api-key" (include "conch.fullname" .) -}}
{{- end -}}
{{- end -}}

{{/* The image reference. */}}
{{- define "conch.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
