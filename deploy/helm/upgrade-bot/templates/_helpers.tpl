{{/* The chart's name, or nameOverride (the app.kubernetes.io/name label). */}}
{{- define "upgrade-bot.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The release's name for every object (63 characters at most, a DNS label); fullnameOverride wins. */}}
{{- define "upgrade-bot.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "upgrade-bot.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "upgrade-bot.selectorLabels" -}}
app.kubernetes.io/name: {{ include "upgrade-bot.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* registry/repository:tag, or registry/repository@digest when a digest is given (it wins). */}}
{{- define "upgrade-bot.image" -}}
{{- $repository := .Values.image.repository -}}
{{- with .Values.image.registry -}}
{{- $repository = printf "%s/%s" (trimSuffix "/" .) $repository -}}
{{- end -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" $repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" $repository (.Values.image.tag | default .Chart.AppVersion | toString) -}}
{{- end -}}
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
