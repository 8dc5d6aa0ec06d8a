"""`helm template --include-crds` with Helm's own engine, for tests/tests/deploy_manifests/helm.rs.

Runs with the venv of `cargo xtask setup` (helm-python-sdk: ctypes bindings to libhelm_c, a C
ABI over Helm's Go SDK, helm.sh/helm/v4). Usage:

    helm_template.py CHART RELEASE NAMESPACE VALUES_JSON
    helm_template.py --lint CHART NAMESPACE VALUES_JSON
    helm_template.py --set EXPRESSION...

Prints one JSON object: {"helm": <Helm SDK version>, "crds": {file: text}, "manifests":
{template: text}} (templates that render to nothing are left out). A template that fails
exits 1 with Helm's error on stderr. With --lint, `helm lint --strict`'s report instead:
{"helm": ..., "messages": [{"severity", "path", "error"}], "errors": [...]}. With --set, the
values the `--set` EXPRESSIONs of a helm command line give (Helm's own parser, later ones
merged over earlier ones as Helm does), as JSON.
"""

import json
import sys

import helm_python as helm


def lint(chart_dir: str, namespace: str, values: str) -> int:
    report = helm.lint(chart_dir, json.loads(values), strict=True, namespace=namespace)
    report["helm"] = helm.helm_sdk_version()
    json.dump(report, sys.stdout)
    return 0


def merge(into: dict, values: dict) -> dict:
    for key, value in values.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            merge(into[key], value)
        else:
            into[key] = value
    return into


def sets(expressions: list[str]) -> int:
    values: dict = {}
    for expression in expressions:
        try:
            merge(values, helm.parse_set_string(expression))
        except helm.HelmError as error:
            print(f"--set {expression}: {error}", file=sys.stderr)
            return 1
    json.dump(values, sys.stdout)
    return 0


def main() -> int:
    if sys.argv[1] == "--set":
        return sets(sys.argv[2:])
    if sys.argv[1] == "--lint":
        return lint(*sys.argv[2:])
    chart_dir, release, namespace, values = sys.argv[1:]
    with helm.Chart.load(chart_dir) as chart:
        try:
            rendered = chart.render(
                json.loads(values), name=release, namespace=namespace, is_install=True
            )
        except helm.HelmError as error:
            print(error, file=sys.stderr)
            return 1
        crds = {crd["filename"]: crd["data"] for crd in chart.crds}
    manifests = {
        name: text
        for name, text in rendered.items()
        if name.endswith((".yaml", ".yml")) and text.strip()
    }
    json.dump(
        {"helm": helm.helm_sdk_version(), "crds": crds, "manifests": manifests},
        sys.stdout,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
