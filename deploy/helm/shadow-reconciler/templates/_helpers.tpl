{{/*
The labels of every object: those kustomize gives deploy/ (name, part-of) with Helm's own
(managed-by, helm.sh/chart, instance, version). Selectors never use them: they are written out
(name + component), as in deploy/, so an upgrade never changes a selector.
*/}}
{{- define "shadow-reconciler.labels" -}}
app.kubernetes.io/name: shadow-reconciler
app.kubernetes.io/part-of: shadow-reconciler
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end }}

{{/* The image reference: by digest when one is given, else by tag (the appVersion by default). */}}
{{- define "shadow-reconciler.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end }}
