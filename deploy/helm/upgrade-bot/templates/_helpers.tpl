{{/* The release's name for every object (63 characters at most, a DNS label). */}}
{{- define "upgrade-bot.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "upgrade-bot.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "upgrade-bot.labels" -}}
{{ include "upgrade-bot.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "upgrade-bot.serviceAccountName" -}}
{{- default (include "upgrade-bot.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}

{{/* "true" when the configuration names a PostgreSQL database (several replicas may share it). */}}
{{- define "upgrade-bot.postgres" -}}
{{- $config := .Values.config | default dict -}}
{{- if hasPrefix "postgresql" (toString ($config.database_url | default "")) -}}true{{- end -}}
{{- end -}}

{{/* Replicas: as set, else 2 with PostgreSQL and 1 with SQLite (a file on one volume: never more). */}}
{{- define "upgrade-bot.replicas" -}}
{{- $postgres := include "upgrade-bot.postgres" . -}}
{{- if kindIs "invalid" .Values.replicas -}}
{{- ternary 2 1 (eq $postgres "true") -}}
{{- else -}}
{{- if and (ne $postgres "true") (gt (int .Values.replicas) 1) -}}
{{- fail "replicas > 1 needs config.database_url: postgresql://… (SQLite holds one replica's state)" -}}
{{- end -}}
{{- int .Values.replicas -}}
{{- end -}}
{{- end -}}

{{/* The configuration file: the values' config, with data_dir on the volume when SQLite is used. */}}
{{- define "upgrade-bot.config" -}}
{{- $config := deepCopy (.Values.config | default dict) -}}
{{- if ne (include "upgrade-bot.postgres" .) "true" -}}
{{- $_ := set $config "data_dir" "/data" -}}
{{- end -}}
{{- toYaml $config -}}
{{- end -}}
