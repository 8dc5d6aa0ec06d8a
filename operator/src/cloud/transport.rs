//! The operator's https client for every cloud request (the cloud's API, its metadata service,
//! its token endpoints): one hyper-util legacy client over rustls (http and https, the system's
//! roots; the TLS stack kube already uses, no second one). The exchange itself (request, send
//! with a timeout and a body limit, the response and its errors) is `weft_aws_imds::transport`'s,
//! re-exported here; this module adds only TLS, which the agent must not link.

use hyper_rustls::{HttpsConnector, HttpsConnectorBuilder};
use hyper_util::{
    client::legacy::{Client, connect::HttpConnector},
    rt::TokioExecutor,
};
pub use weft_aws_imds::transport::{Response, TransportError, request, send};

/// The client every cloud request goes through.
pub type HttpClient = weft_aws_imds::transport::HttpClient<HttpsConnector<HttpConnector>>;

/// A client for http and https URLs with the system's root certificates.
///
/// # Errors
/// [`TransportError::NativeRoots`] when the roots cannot be loaded.
pub fn client() -> Result<HttpClient, TransportError> {
    let https = HttpsConnectorBuilder::new()
        .with_native_roots()
        .map_err(|source| TransportError::NativeRoots { source })?
        .https_or_http()
        .enable_http1()
        .build();
    Ok(Client::builder(TokioExecutor::new()).build(https))
}
