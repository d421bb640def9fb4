{{/*
dcontroller.fullname is the prefix of every object's name: the release
name, or "<release>-dcontroller" when the release name lacks "dcontroller".
*/}}
{{- define "dcontroller.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* dcontroller.labels are the labels of every object. */}}
{{- define "dcontroller.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "dcontroller.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: dcontroller
{{- end -}}

{{/* dcontroller.selectorLabels select the manager's pods. */}}
{{- define "dcontroller.selectorLabels" -}}
app.kubernetes.io/name: dcontroller
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: manager
{{- end -}}

{{/* dcontroller.serviceAccountName is the manager's ServiceAccount. */}}
{{- define "dcontroller.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "dcontroller.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/*
dcontroller.leaderElect says whether the manager elects a leader: never with
sharding.enabled (every replica is active and dctl start refuses
--leader-elect together with --sharding), else with leaderElection.enabled
or more than one replica.
*/}}
{{- define "dcontroller.leaderElect" -}}
{{- if not .Values.sharding.enabled -}}
{{- if or .Values.leaderElection.enabled (gt (int .Values.replicas) 1) -}}true{{- end -}}
{{- end -}}
{{- end -}}
