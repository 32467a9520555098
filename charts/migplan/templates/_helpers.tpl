{{/* Labels every object carries; deploy/ sets the first one too. */}}
{{- define "migplan.labels" -}}
app.kubernetes.io/part-of: migplan
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "migplan.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{- define "migplan.agentSubject" -}}
system:serviceaccount:{{ .Values.agent.namespace }}:{{ include "migplan.fullname" . }}-agent
{{- end -}}

{{/* The chart's name, or nameOverride. */}}
{{- define "migplan.name" -}}
{{ .Values.nameOverride | default .Chart.Name | trunc 38 | trimSuffix "-" }}
{{- end -}}

{{/*
What every object's name starts with: fullnameOverride, else the release's name where it
holds the chart's (release "migplan": "migplan", deploy/'s names), else release-name. At most
38 characters, so that the longest suffix (-operator-auth-delegator) keeps a name within 63.
*/}}
{{- define "migplan.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{ .Values.fullnameOverride | trunc 38 | trimSuffix "-" }}
{{- else -}}
{{- $name := include "migplan.name" . -}}
{{- if contains $name .Release.Name -}}
{{ .Release.Name | trunc 38 | trimSuffix "-" }}
{{- else -}}
{{ printf "%s-%s" .Release.Name $name | trunc 38 | trimSuffix "-" }}
{{- end -}}
{{- end -}}
{{- end -}}
