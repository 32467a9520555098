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
system:serviceaccount:{{ .Values.agent.namespace }}:migplan-agent
{{- end -}}
