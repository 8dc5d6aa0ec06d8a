{{/*
Checks of the values that no template could render sensibly: an IPAM mode weft does not run,
a cloud mode without its enabled flag (or the reverse). Each fails the install with the value
and the way out.
*/}}
{{- define "weft.checks" -}}
{{- $modes := list "multi-pool" "cluster-pool" "azure" "kubernetes" "eni" -}}
{{- if not (has .Values.ipam.mode $modes) -}}
{{- fail (printf "ipam.mode %q is not one this chart installs: use one of %s" .Values.ipam.mode (join ", " $modes)) -}}
{{- end -}}
{{- if ne (eq .Values.ipam.mode "azure") (.Values.azure.enabled | default false) -}}
{{- fail "azure.enabled and ipam.mode azure go together (as in Cilium's chart): set both or neither" -}}
{{- end -}}
{{- if ne (eq .Values.ipam.mode "eni") (.Values.eni.enabled | default false) -}}
{{- fail "eni.enabled and ipam.mode eni go together (as in Cilium's chart): set both or neither" -}}
{{- end -}}
{{- end -}}

{{/* weft-operator runs: enabled, and a mode it serves. */}}
{{- define "weft.operator" -}}
{{- if and .Values.operator.enabled (has .Values.ipam.mode (list "multi-pool" "cluster-pool" "azure")) -}}
true
{{- end -}}
{{- end -}}

{{/* The image of every container. */}}
{{- define "weft.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag }}
{{- end -}}

{{/* auto-create-cilium-pod-ip-pools from Cilium's map shape: name=ipv4-cidrs:..;ipv4-mask-size:.. */}}
{{- define "weft.autoCreatePools" -}}
{{- $pools := list -}}
{{- range $name, $pool := .Values.ipam.operator.autoCreateCiliumPodIPPools -}}
{{- $parts := list -}}
{{- with $pool.ipv4 -}}
{{- $parts = append $parts (printf "ipv4-cidrs:%s" (join "," .cidrs)) -}}
{{- $parts = append $parts (printf "ipv4-mask-size:%v" .maskSize) -}}
{{- end -}}
{{- with $pool.ipv6 -}}
{{- $parts = append $parts (printf "ipv6-cidrs:%s" (join "," .cidrs)) -}}
{{- $parts = append $parts (printf "ipv6-mask-size:%v" .maskSize) -}}
{{- end -}}
{{- $pools = append $pools (printf "%s=%s" $name (join ";" $parts)) -}}
{{- end -}}
{{- join " " $pools -}}
{{- end -}}
