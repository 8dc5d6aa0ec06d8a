//! The emulator's HTTP response body: a whole buffer (sent with `Content-Length`) or a stream of
//! chunks fed through a channel (sent chunked, for watches). An `Err` chunk makes hyper abort
//! the connection without the terminating chunk, which is how a dropped watch is faked. Also
//! reads a request body into memory with a size cap.

use std::{
    future::poll_fn,
    io,
    pin::Pin,
    task::{Context, Poll},
};

use bytes::{Bytes, BytesMut};
use hyper::body::{Body as _, Frame, Incoming, SizeHint};
use tokio::sync::mpsc;

use super::status::ApiError;

/// Largest request body accepted (the real server's limit is 3 MiB for most writes).
const MAX_REQUEST: usize = 3 * 1024 * 1024;

/// A response body.
#[derive(Debug)]
pub enum Body {
    /// The whole body at once (taken when sent).
    Full(Option<Bytes>),
    /// Chunks as they come; the stream ends when every sender is gone.
    Stream(mpsc::Receiver<Result<Bytes, io::Error>>),
}

impl Body {
    /// A whole body.
    #[must_use]
    pub fn full(bytes: impl Into<Bytes>) -> Self {
        Self::Full(Some(bytes.into()))
    }
}

impl hyper::body::Body for Body {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        match self.get_mut() {
            Self::Full(bytes) => Poll::Ready(bytes.take().map(|b| Ok(Frame::data(b)))),
            Self::Stream(rx) => rx.poll_recv(cx).map(|c| c.map(|r| r.map(Frame::data))),
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(self, Self::Full(None))
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Self::Full(Some(b)) => SizeHint::with_exact(b.len() as u64),
            Self::Full(None) => SizeHint::with_exact(0),
            Self::Stream(_) => SizeHint::default(),
        }
    }
}

/// Read a whole request body.
///
/// # Errors
/// BadRequest when the body breaks off or is larger than the cap.
pub async fn read(mut body: Incoming) -> Result<Bytes, ApiError> {
    let mut buf = BytesMut::new();
    while let Some(frame) = poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await {
        let frame = frame.map_err(|e| ApiError::BadRequest {
            message: format!("reading the request body: {e}"),
        })?;
        if let Ok(data) = frame.into_data() {
            buf.extend_from_slice(&data);
        }
        if buf.len() > MAX_REQUEST {
            return Err(ApiError::BadRequest {
                message: "request body too large".to_owned(),
            });
        }
    }
    Ok(buf.freeze())
}
