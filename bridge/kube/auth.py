"""Credentials and TLS for the Kubernetes API: where the client's ``Configuration`` comes
from, and the session that carries it.

The configuration is kubernetes_asyncio's: the API server's URL, its CA, the bearer token or
client certificate (an in-cluster service account, a kubeconfig, or an exec plugin that
refreshes the token). :func:`load_configuration` reads it; :func:`open_session` builds the
aiohttp session (kubernetes_asyncio's ``ApiClient``) that carries its TLS settings, with the
proxy read once (:func:`_env_read_once`). Every request takes its credentials from the
session again (``update_params_for_auth``: a rotated token is picked up), in
:meth:`bridge.kube.api.KubeApi._send`.
"""

from __future__ import annotations

import ssl
from pathlib import Path

from aiohttp.helpers import get_env_proxy_for_url
from kubernetes_asyncio.client import ApiClient, Configuration
from kubernetes_asyncio.config import ConfigException, load_incluster_config, load_kube_config
from yarl import URL

from bridge.errors import ConfigError

USER_AGENT = "slurm-bridge"


async def load_configuration(
    kubeconfig: Path | None, *, context: str | None = None
) -> Configuration:
    """From ``kubeconfig``; when None, in-cluster, then ``~/.kube/config``.

    ``load_kube_config`` is a coroutine in kubernetes_asyncio; ``load_incluster_config``
    is not.
    """
    conf = Configuration()
    try:
        if kubeconfig is not None:
            await load_kube_config(
                config_file=str(kubeconfig), context=context, client_configuration=conf
            )
        else:
            try:
                load_incluster_config(client_configuration=conf)  # type: ignore[no-untyped-call]
            except ConfigException:
                await load_kube_config(context=context, client_configuration=conf)
    except (ConfigException, OSError) as e:
        raise ConfigError("kubeconfig", f"cannot load Kubernetes credentials: {e}") from None
    return conf


def open_session(configuration: Configuration) -> ApiClient:
    """kubernetes_asyncio's ``ApiClient`` for ``configuration``: its aiohttp session (TLS
    settings, credentials), our user agent, the proxy read once."""
    api = ApiClient(configuration)
    api.user_agent = USER_AGENT
    _env_read_once(api, configuration)
    return api


def _env_read_once(api: ApiClient, configuration: Configuration) -> None:
    """kubernetes_asyncio's session has ``trust_env=True``: aiohttp then reads the proxy
    variables and ``~/.netrc`` in a worker thread for EVERY request (~10% of the
    scheduler's CPU in a burst, py-spy). The proxy for the API server is read once here
    (kept unless it needs credentials aiohttp would only take per request); netrc is
    never needed (bearer tokens and client certificates)."""
    rest = api.rest_client
    if rest.proxy is None:
        try:
            proxy, auth = get_env_proxy_for_url(URL(str(configuration.host)))
        except LookupError:  # no proxy for this host
            proxy, auth = None, None
        if auth is not None:
            return  # a proxy with credentials: leave aiohttp's per-request handling
        if proxy is not None:
            rest.proxy = str(proxy)
    rest.pool_manager._trust_env = False


def tls_context(configuration: Configuration) -> ssl.SSLContext:
    """The TLS settings of ``configuration`` (its CA, client certificate, verification),
    as kubernetes_asyncio's own session builds them (``RESTClientObject``): for
    :mod:`bridge.http1`, which carries the plain requests."""
    context = ssl.create_default_context(cafile=configuration.ssl_ca_cert)
    if configuration.cert_file:
        context.load_cert_chain(configuration.cert_file, keyfile=configuration.key_file)
    if not configuration.verify_ssl:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if configuration.disable_strict_ssl_verification:
        context.verify_flags &= ~ssl.VERIFY_X509_STRICT
    return context
