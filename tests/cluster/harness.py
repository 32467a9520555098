"""A real Kubernetes control plane for tests: etcd, kube-apiserver, kube-controller-manager,
kube-scheduler and kwok, built from Go modules by build.sh and started on loopback ports.

    python tests/cluster/harness.py up      # start, print the kubeconfig path, wait for Ctrl-C
    python tests/cluster/harness.py build   # only build (or reuse) the binaries

The API server runs with RBAC, TLS from generated certificates, service-account signing keys
and an admin client certificate. Every process runs in its own process group and dies with
the process that started it (PR_SET_PDEATHSIG), so nothing survives a failing or killed test
run; `stop()` also terminates them explicitly and a later start reaps leftovers of a run that
was killed outright.
"""

from __future__ import annotations

import contextlib
import ctypes
import datetime
import http.client
import ipaddress
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import NameOID

HERE = Path(__file__).resolve().parent
BUILD = HERE / "build.sh"
REGISTRY = Path(os.environ.get("MIGPLAN_CACHE", Path.home() / ".cache" / "migplan")) / "pids"
START_TIMEOUT = 90.0
PR_SET_PDEATHSIG = 1


DRA_TAINT_RULES = "--feature-gates=DRADeviceTaintRules=true,GenericWorkload=true"
"""DeviceTaintRules (beta, off by default in 1.36): what migplan's DRA `steer` mode writes to
keep the scheduler off slots outside the plan. The API server, the scheduler (which applies
the rules when allocating) and the controller-manager (which evicts for NoExecute) all need it.
GenericWorkload (alpha): pods join a PodGroup by `spec.schedulingGroup`."""
GANG_SCHEDULING = DRA_TAINT_RULES + ",GangScheduling=true"
"""The scheduler's GangScheduling plugin (alpha in 1.36): a PodGroup's pods bind together."""
DRA_STEER_FLAGS = (
    DRA_TAINT_RULES,
    "--runtime-config=resource.k8s.io/v1beta2=true,scheduling.k8s.io/v1alpha2=true",
)
"""...and the API server serves DeviceTaintRule at resource.k8s.io/v1beta2 and PodGroups at
scheduling.k8s.io/v1alpha2 (both off by default)."""


class ControlPlaneError(RuntimeError):
    """The control plane could not be built or started; the message says why."""


def build_binaries() -> Path:
    """Run build.sh (reusing cached binaries) and return the directory holding them."""
    result = subprocess.run(["bash", str(BUILD)], capture_output=True, text=True, check=False)
    sys.stderr.write(result.stderr)
    if result.returncode != 0:
        raise ControlPlaneError(
            f"building the control plane failed (exit {result.returncode}): "
            f"{result.stderr.strip().splitlines()[-1] if result.stderr.strip() else ''}"
        )
    return Path(result.stdout.strip().splitlines()[-1])


LEASE_SECONDS = 40
"""A node Lease's duration, as kubelets set it (renewed every quarter of it)."""

STATUS_REPORT_MS = 300_000
"""How often a kubelet posts an unchanged node status where it renews a Lease (its
nodeStatusReportFrequency, 5 minutes)."""


def _kubelet_status_stage(folder: Path) -> str:
    """kwok's node-heartbeat-with-lease stage (copied by build.sh from the pinned kwok
    module) posting the status every 5 minutes, as kubelets do, instead of kwok's 10."""
    found = sorted(folder.glob("*.yaml"))
    if not found:
        raise ControlPlaneError(f"no kwok lease stage in {folder}: run tests/cluster/build.sh")
    stage = yaml.safe_load(found[0].read_text())
    stage["spec"]["delay"] = {
        "durationMilliseconds": STATUS_REPORT_MS,
        "jitterDurationMilliseconds": STATUS_REPORT_MS + 10_000,
    }
    return yaml.safe_dump(stage, sort_keys=False)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _die_with_parent() -> None:
    """Run in the child before exec: get SIGKILL when the parent dies."""
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


# ---- certificates --------------------------------------------------------------------------


@dataclass
class _Pki:
    directory: Path
    ca_key: ec.EllipticCurvePrivateKey = field(init=False)
    ca_cert: x509.Certificate = field(init=False)

    def __post_init__(self) -> None:
        self.ca_key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "migplan-test-ca")])
        now = datetime.datetime.now(datetime.UTC)
        self.ca_cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(self.ca_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=2))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    key_cert_sign=True,
                    crl_sign=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .sign(self.ca_key, hashes.SHA256())
        )
        self._write("ca.crt", self.ca_cert.public_bytes(serialization.Encoding.PEM))

    def _write(self, name: str, data: bytes) -> Path:
        path = self.directory / name
        path.write_bytes(data)
        path.chmod(0o600)
        return path

    def issue(
        self, name: str, *, common_name: str, organization: str | None = None, server: bool = False
    ) -> tuple[Path, Path]:
        """A key and certificate signed by the CA; returns (cert, key) paths."""
        key = ec.generate_private_key(ec.SECP256R1())
        attributes = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
        if organization:
            attributes.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
        now = datetime.datetime.now(datetime.UTC)
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name(attributes))
            .issuer_name(self.ca_cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=2))
            .add_extension(
                x509.ExtendedKeyUsage(
                    [
                        x509.oid.ExtendedKeyUsageOID.SERVER_AUTH
                        if server
                        else x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH
                    ]
                ),
                critical=False,
            )
        )
        if server:
            builder = builder.add_extension(
                x509.SubjectAlternativeName(
                    [
                        x509.DNSName("localhost"),
                        x509.DNSName("kubernetes"),
                        x509.DNSName("kubernetes.default"),
                        x509.DNSName("kubernetes.default.svc"),
                        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                    ]
                ),
                critical=False,
            )
        cert = builder.sign(self.ca_key, hashes.SHA256())
        key_pem = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        return (
            self._write(f"{name}.crt", cert.public_bytes(serialization.Encoding.PEM)),
            self._write(f"{name}.key", key_pem),
        )

    def service_account_keys(self) -> tuple[Path, Path]:
        """An RSA key pair for signing service-account tokens: (private, public)."""
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        private = self._write(
            "sa.key",
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            ),
        )
        public = self._write(
            "sa.pub",
            key.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            ),
        )
        return private, public


def _client_cert(pair: tuple[Path, Path]) -> dict[str, str]:
    """kubeconfig user credentials from a (certificate, key) pair."""
    return {"client-certificate": str(pair[0]), "client-key": str(pair[1])}


def _kubeconfig(
    path: Path, *, server: str, ca: Path, user: str, credentials: dict[str, str]
) -> Path:
    """A kubeconfig for `server` as `user` with `credentials` (client cert and key, or a
    token)."""
    path.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {
                        "name": "migplan-test",
                        "cluster": {"server": server, "certificate-authority": str(ca)},
                    }
                ],
                "users": [{"name": user, "user": credentials}],
                "contexts": [
                    {"name": "migplan-test", "context": {"cluster": "migplan-test", "user": user}}
                ],
                "current-context": "migplan-test",
            },
            indent=2,
        )
    )
    return path


# ---- processes ---------------------------------------------------------------------------------


@dataclass
class _Process:
    name: str
    popen: subprocess.Popen[bytes]
    log: Path
    argv: list[str] = field(default_factory=list)
    env: dict[str, str] | None = None

    def tail(self, lines: int = 15) -> str:
        with contextlib.suppress(OSError):
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        return ""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def reap_leftovers() -> list[int]:
    """Kill process groups recorded by runs that died before they could stop them.

    A record names the process group and the run that started it; groups of runs still
    alive (another test session on this machine) are left alone.
    """
    killed = []
    if not REGISTRY.is_dir():
        return killed
    for record in REGISTRY.glob("*.pgid"):
        with contextlib.suppress(ValueError, OSError):
            pgid, _, owner = record.read_text().partition(" ")
            if owner and _alive(int(owner)):
                continue
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(int(pgid), signal.SIGKILL)
                killed.append(int(pgid))
        record.unlink(missing_ok=True)
    return killed


@dataclass
class ControlPlane:
    """One running control plane; use `start()` / `stop()` or `with ControlPlane.up() as cp`."""

    bin_dir: Path
    run_dir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="migplan-k8s-")))
    processes: list[_Process] = field(default_factory=list)
    api_port: int = 0
    heartbeat: str = "status"
    """How kwok's nodes beat: "status" (kwok's default stage, the node's status posted every
    20-25 s) or "lease" (as kubelets do: a Lease renewed every 10 s, the status posted every
    5 minutes), for fleets of thousands of nodes."""
    kubeconfig: Path = field(init=False)
    pki_dir: Path = field(init=False)
    _pki: _Pki | None = field(default=None, init=False, repr=False)

    @classmethod
    @contextlib.contextmanager
    def up(
        cls, bin_dir: Path | None = None, *, heartbeat: str = "status"
    ) -> Iterator[ControlPlane]:
        """Build if needed, start, yield, and always stop."""
        plane = cls(bin_dir or build_binaries(), heartbeat=heartbeat)
        try:
            plane.start()
            yield plane
        finally:
            plane.stop()

    @property
    def server(self) -> str:
        """The API server's URL."""
        return f"https://127.0.0.1:{self.api_port}"

    def start(self) -> None:
        """Start every component and wait until the cluster is usable."""
        reap_leftovers()
        started = time.monotonic()
        self.pki_dir = self.run_dir / "pki"
        self.pki_dir.mkdir(parents=True)
        pki = self._pki = _Pki(self.pki_dir)
        ca = self.pki_dir / "ca.crt"
        serving = pki.issue("apiserver", common_name="kube-apiserver", server=True)
        admin = pki.issue("admin", common_name="migplan-admin", organization="system:masters")
        kcm = pki.issue("controller-manager", common_name="system:kube-controller-manager")
        sched = pki.issue("scheduler", common_name="system:kube-scheduler")
        sa_private, sa_public = pki.service_account_keys()
        self.api_port = _free_port()
        self.kubeconfig = _kubeconfig(
            self.run_dir / "admin.kubeconfig",
            server=self.server,
            ca=ca,
            credentials=_client_cert(admin),
            user="admin",
        )
        kcm_config = _kubeconfig(
            self.run_dir / "kcm.kubeconfig",
            server=self.server,
            ca=ca,
            credentials=_client_cert(kcm),
            user="kcm",
        )
        sched_config = _kubeconfig(
            self.run_dir / "scheduler.kubeconfig",
            server=self.server,
            ca=ca,
            credentials=_client_cert(sched),
            user="scheduler",
        )

        etcd_client, etcd_peer = _free_port(), _free_port()
        self._spawn(
            "etcd",
            [
                "etcd",
                f"--data-dir={self.run_dir / 'etcd'}",
                f"--listen-client-urls=http://127.0.0.1:{etcd_client}",
                f"--advertise-client-urls=http://127.0.0.1:{etcd_client}",
                f"--listen-peer-urls=http://127.0.0.1:{etcd_peer}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{etcd_peer}",
                f"--initial-cluster=default=http://127.0.0.1:{etcd_peer}",
                "--unsafe-no-fsync",
                "--log-level=warn",
            ],
        )
        self._wait_http(f"http://127.0.0.1:{etcd_client}/health", "etcd")
        self._spawn(
            "kube-apiserver",
            [
                "kube-apiserver",
                f"--etcd-servers=http://127.0.0.1:{etcd_client}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={self.api_port}",
                f"--tls-cert-file={serving[0]}",
                f"--tls-private-key-file={serving[1]}",
                f"--client-ca-file={ca}",
                "--authorization-mode=Node,RBAC",
                f"--service-account-key-file={sa_public}",
                f"--service-account-signing-key-file={sa_private}",
                "--service-account-issuer=https://kubernetes.default.svc",
                "--service-cluster-ip-range=10.96.0.0/16",
                "--allow-privileged=true",
                "--enable-priority-and-fairness=false",
                "--profiling=false",
                *DRA_STEER_FLAGS,
            ],
        )
        self._wait_api("/readyz")
        controllers = [
            "kube-controller-manager",
            f"--kubeconfig={kcm_config}",
            f"--authentication-kubeconfig={kcm_config}",
            f"--authorization-kubeconfig={kcm_config}",
            f"--service-account-private-key-file={sa_private}",
            f"--root-ca-file={ca}",
            "--use-service-account-credentials=true",
            "--leader-elect=false",
            "--bind-address=127.0.0.1",
            f"--secure-port={_free_port()}",
            "--controllers=*,-nodeipam,-cloud-node-lifecycle,-service-lb-controller,"
            "-node-route-controller",
            "--node-monitor-grace-period=40s",
            "--profiling=false",
            DRA_TAINT_RULES,
        ]
        self._spawn("kube-controller-manager", controllers)
        self._spawn(
            "kube-scheduler",
            [
                "kube-scheduler",
                f"--kubeconfig={sched_config}",
                f"--authentication-kubeconfig={sched_config}",
                f"--authorization-kubeconfig={sched_config}",
                "--leader-elect=false",
                "--bind-address=127.0.0.1",
                f"--secure-port={_free_port()}",
                "--profiling=false",
                GANG_SCHEDULING,
            ],
        )
        self._spawn(
            "kwok",
            [
                "kwok",
                f"--kubeconfig={self.kubeconfig}",
                "--manage-all-nodes=false",
                "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
                "--node-ip=127.0.0.1",
                f"--node-port={_free_port()}",
                f"--server-address=127.0.0.1:{_free_port()}",
                f"--config={self._kwok_config()}",
                *(
                    [f"--node-lease-duration-seconds={LEASE_SECONDS}"]
                    if self.heartbeat == "lease"
                    else []
                ),
            ],
            env={"HOME": str(self.run_dir)},
        )
        # The cluster is usable once the token controller has made the default
        # ServiceAccount (controller-manager up and authorised).
        self._wait(
            lambda: (
                self.kubectl(
                    "get", "serviceaccount", "default", "-n", "default", check=False
                ).returncode
                == 0
            ),
            "the default ServiceAccount (kube-controller-manager)",
        )
        self.startup_seconds = time.monotonic() - started

    def _kwok_config(self) -> Path:
        """kwok's configuration: the stages build.sh copied from the pinned kwok module."""
        stages = sorted((self.bin_dir / "kwok-stages").glob("*.yaml"))
        if not stages:
            raise ControlPlaneError(
                f"no kwok stages in {self.bin_dir / 'kwok-stages'}: run tests/cluster/build.sh"
            )
        documents = [
            "apiVersion: config.kwok.x-k8s.io/v1alpha1\nkind: KwokConfiguration\n"
            "options:\n  nodePlayStageParallelism: 4\n  podPlayStageParallelism: 4\n"
            "  nodeLeaseParallelism: 4\n"
        ]
        if self.heartbeat == "lease":
            stages = [p for p in stages if p.name != "node-heartbeat.yaml"]
            documents.append(_kubelet_status_stage(self.bin_dir / "kwok-stages-lease"))
        documents += [path.read_text() for path in stages]
        path = self.run_dir / "kwok.yaml"
        path.write_text("\n---\n".join(documents))
        return path

    def install_crds(self, folder: str, names: tuple[str, ...], what: str) -> None:
        """Apply the CRDs build.sh put in `folder` of the bin directory and wait until `names`
        are established."""
        crds = (self.bin_dir / folder).resolve()  # kubectl reads no symlinked folder
        self.kubectl("apply", "--server-side", "-f", str(crds))
        # Polled: `kubectl wait --for=condition=Established` right after the apply fails
        # outright on a CRD whose status has no conditions yet.
        self._wait(
            lambda: all(
                "True"
                in self.kubectl(
                    "get", "crd", name, "-o",
                    "jsonpath={.status.conditions[?(@.type=='Established')].status}",
                    check=False,
                ).stdout
                for name in names
            ),
            f"{what} established",
        )  # fmt: skip

    def install_gang_crds(self) -> None:
        """Volcano's and the scheduler-plugins coscheduling PodGroup CRDs (build.sh: Volcano's
        generated from volcano.sh/apis, the other as its module ships it), established."""
        self.install_crds(
            "gang-crds",
            ("podgroups.scheduling.volcano.sh", "podgroups.scheduling.x-k8s.io"),
            "the gang PodGroup CRDs",
        )

    def start_karpenter(self, *, instance_types: Path) -> None:
        """Karpenter with its kwok cloud provider (built by build.sh) against this cluster,
        with its CRDs: the nodes it launches are kwok nodes of the types in `instance_types`
        (Karpenter's kwok instance-types JSON), which this cluster's kwok runs."""
        if any(p.name == "karpenter" for p in self.processes):
            return
        self.install_crds(
            "karpenter-crds",
            (
                "nodepools.karpenter.sh",
                "nodeclaims.karpenter.sh",
                "kwoknodeclasses.karpenter.kwok.sh",
            ),
            "Karpenter's CRDs",
        )
        health = _free_port()
        env = {
            "KUBECONFIG": str(self.kubeconfig),
            "DISABLE_LEADER_ELECTION": "true",
            "METRICS_PORT": str(_free_port()),
            "HEALTH_PROBE_PORT": str(health),
            "INSTANCE_TYPES_FILE_PATH": str(instance_types),
            "SYSTEM_NAMESPACE": "kube-system",
            "BATCH_MAX_DURATION": "2s",
            "BATCH_IDLE_DURATION": "1s",
        }
        self._spawn("karpenter", ["karpenter-kwok"], env=env)
        self._wait_http(f"http://127.0.0.1:{health}/readyz", "Karpenter's controller")

    def start_kueue(self) -> None:
        """Kueue's controller (built by build.sh) against this cluster, with its CRDs.

        Its webhooks are not registered: tests create Jobs suspended and labelled with their
        queue, as Kueue's Job webhook would leave them. Kueue reads its metrics certificate
        from a fixed path (/etc/kueue/metrics/certs) when it does not manage certificates
        itself, so it runs in a private mount namespace (`unshare -m`) whose /etc is a tmpfs
        holding only that certificate, signed by this cluster's CA like its webhook's.
        """
        if any(p.name == "kueue" for p in self.processes):
            return
        self.install_crds(
            "kueue-crds",
            tuple(
                f"{kind}.kueue.x-k8s.io"
                for kind in ("workloads", "admissionchecks", "clusterqueues", "localqueues")
            ),
            "Kueue's CRDs",
        )
        if self.kubectl("get", "namespace", "kueue-system", check=False).returncode != 0:
            self.kubectl("create", "namespace", "kueue-system")
        cert, key = self.serving_certificate("kueue")
        certs = self.run_dir / "kueue-certs"
        certs.mkdir(exist_ok=True)
        shutil.copy(cert, certs / "tls.crt")
        shutil.copy(key, certs / "tls.key")
        health = _free_port()
        config = self.run_dir / "kueue.yaml"
        config.write_text(
            "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n"
            "namespace: kueue-system\n"
            f"health:\n  healthProbeBindAddress: 127.0.0.1:{health}\n"
            'metrics:\n  bindAddress: "0"\n'
            f"webhook:\n  port: {_free_port()}\n  host: 127.0.0.1\n  certDir: {certs}\n"
            "leaderElection:\n  leaderElect: false\n"
            "internalCertManagement:\n  enable: false\n"
            'integrations:\n  frameworks: ["batch/job"]\n'
        )
        wrapper = self.run_dir / "kueue.sh"
        wrapper.write_text(
            "#!/bin/sh\nset -e\nmount -t tmpfs migplan-kueue /etc\n"
            "mkdir -p /etc/kueue/metrics/certs\n"
            f'cp "{certs}/tls.crt" "{certs}/tls.key" /etc/kueue/metrics/certs/\n'
            f'exec "{self.bin_dir / "kueue"}" --config="{config}" --kubeconfig="{self.kubeconfig}"'
            " --feature-gates=VisibilityOnDemand=false\n"
        )
        wrapper.chmod(0o755)
        unshare = shutil.which("unshare")
        if unshare is None:
            raise ControlPlaneError("Kueue needs unshare(1) (util-linux) for its mount namespace")
        self._spawn("kueue", [unshare, "--mount", "--propagation", "private", str(wrapper)])
        self._wait_http(f"http://127.0.0.1:{health}/readyz", "Kueue's controller")

    def _spawn(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> None:
        log = self.run_dir / f"{name}.log"
        binary = Path(argv[0]) if Path(argv[0]).is_absolute() else self.bin_dir / argv[0]
        if not binary.exists():
            raise ControlPlaneError(f"{binary} is missing: run tests/cluster/build.sh")
        with log.open("ab") as out:
            popen = subprocess.Popen(
                [str(binary), *argv[1:]],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                preexec_fn=_die_with_parent,  # noqa: PLW1509 - started from the main thread; see module doc
                cwd=self.run_dir,
                env={**os.environ, **(env or {})},
            )
        REGISTRY.mkdir(parents=True, exist_ok=True)
        (REGISTRY / f"{popen.pid}.pgid").write_text(f"{popen.pid} {os.getpid()}")
        self.processes.append(_Process(name, popen, log, list(argv), env))

    def serving_certificate(self, name: str) -> tuple[Path, Path]:
        """A (certificate, key) for a loopback server, signed by this cluster's CA (so every
        kubeconfig of this cluster trusts it): for test servers in front of the API."""
        if self._pki is None:
            raise ControlPlaneError("the control plane is not started")
        return self._pki.issue(name, common_name=name, server=True)

    def _process(self, name: str) -> _Process:
        found = [p for p in self.processes if p.name == name]
        if not found:
            raise ControlPlaneError(f"no component named {name}")
        return found[0]

    def restart(self, name: str, *, down_for: float = 0.0) -> None:
        """Stop component `name` (TERM, then KILL), keep it down `down_for` seconds, start it
        again with the same arguments and data, and wait until the API answers again: what
        a control-plane upgrade or a crash does. For the fault tests."""
        old = self._process(name)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(old.popen.pid, signal.SIGTERM)
        try:
            old.popen.wait(timeout=10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(old.popen.pid, signal.SIGKILL)
            old.popen.wait()
        (REGISTRY / f"{old.popen.pid}.pgid").unlink(missing_ok=True)
        self.processes.remove(old)
        time.sleep(down_for)
        self._spawn(name, old.argv, old.env)
        self._wait_api("/readyz")

    @contextlib.contextmanager
    def paused(self, name: str) -> Iterator[None]:
        """Component `name` frozen (SIGSTOP) for the `with` block, then resumed (SIGCONT): a
        control plane that stops answering without closing its connections."""
        process = self._process(name)
        os.killpg(process.popen.pid, signal.SIGSTOP)
        try:
            yield
        finally:
            os.killpg(process.popen.pid, signal.SIGCONT)

    def _check_alive(self) -> None:
        for p in self.processes:
            if p.popen.poll() is not None:
                raise ControlPlaneError(
                    f"{p.name} exited with code {p.popen.returncode}; last log lines:\n{p.tail()}"
                )

    def _wait(self, ready, what: str, timeout: float = START_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self._check_alive()
            with contextlib.suppress(OSError, http.client.HTTPException, ssl.SSLError):
                if ready():
                    return
            time.sleep(0.2)
        logs = "\n".join(f"--- {p.name}:\n{p.tail(8)}" for p in self.processes)
        raise ControlPlaneError(f"timed out after {timeout:.0f} s waiting for {what}\n{logs}")

    def _wait_http(self, url: str, what: str) -> None:
        host_port = url.split("//", 1)[1].split("/", 1)[0]
        path = "/" + url.split("//", 1)[1].split("/", 1)[1]

        def ready() -> bool:
            conn = http.client.HTTPConnection(host_port, timeout=2)
            conn.request("GET", path)
            return conn.getresponse().status == 200

        self._wait(ready, what)

    def _ssl_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=str(self.pki_dir / "ca.crt"))
        context.load_cert_chain(self.pki_dir / "admin.crt", self.pki_dir / "admin.key")
        return context

    def _wait_api(self, path: str) -> None:
        context = self._ssl_context()

        def ready() -> bool:
            conn = http.client.HTTPSConnection(
                "127.0.0.1", self.api_port, context=context, timeout=2
            )
            conn.request("GET", path)
            return conn.getresponse().status == 200

        self._wait(ready, f"kube-apiserver {path}")

    def service_account_kubeconfig(
        self, *, namespace: str, name: str, bound_pod: str | None = None
    ) -> Path:
        """A kubeconfig that acts as ServiceAccount `namespace/name` (a bound token from the
        TokenRequest API), so a test runs a component with exactly its shipped RBAC. With
        `bound_pod` the token is that pod's, as the kubelet would mount it: it names the
        pod's node (userInfo.extra authentication.kubernetes.io/node-name)."""
        bound = ["--bound-object-kind=Pod", f"--bound-object-name={bound_pod}"]
        token = self.kubectl(
            "create", "token", name, "-n", namespace, "--duration=6h", *(bound if bound_pod else [])
        ).stdout.strip()
        return _kubeconfig(
            self.run_dir / f"{namespace}-{name}-{bound_pod or 'unbound'}.kubeconfig",
            server=self.server,
            ca=self.pki_dir / "ca.crt",
            user=name,
            credentials={"token": token},
        )

    def kubectl(
        self,
        *args: str,
        check: bool = True,
        stdin: str | None = None,
        timeout: float = 60,
        kubeconfig: Path | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """Run the built kubectl against this cluster as the admin (or as `kubeconfig` says)."""
        result = subprocess.run(
            [str(self.bin_dir / "kubectl"), f"--kubeconfig={kubeconfig or self.kubeconfig}", *args],
            capture_output=True,
            text=True,
            input=stdin,
            timeout=timeout,
            check=False,
        )
        if check and result.returncode != 0:
            raise ControlPlaneError(f"kubectl {' '.join(args)} failed: {result.stderr.strip()}")
        return result

    def stop(self) -> None:
        """Terminate every component (TERM, then KILL after 3 s) and remove the run dir."""
        for p in reversed(self.processes):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.popen.pid, signal.SIGTERM)
        deadline = time.monotonic() + 3  # state is thrown away: no need to wait long
        for p in reversed(self.processes):
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.popen.wait(timeout=max(0.1, deadline - time.monotonic()))
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.popen.pid, signal.SIGKILL)
            p.popen.wait()
            (REGISTRY / f"{p.popen.pid}.pgid").unlink(missing_ok=True)
        self.processes.clear()
        if os.environ.get("MIGPLAN_KEEP_CLUSTER_DIR"):
            sys.stderr.write(f"control plane files kept in {self.run_dir}\n")
        else:
            shutil.rmtree(self.run_dir, ignore_errors=True)


def main(argv: list[str]) -> int:
    """`up` starts a control plane until Ctrl-C; `build` only builds."""
    command = argv[1] if len(argv) > 1 else "up"
    if command == "build":
        print(build_binaries())
        return 0
    if command != "up":
        print(__doc__)
        return 2
    with ControlPlane.up() as plane:
        print(f"control plane ready in {plane.startup_seconds:.1f} s")
        print(f"export KUBECONFIG={plane.kubeconfig}")
        with contextlib.suppress(KeyboardInterrupt):
            signal.pause()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
