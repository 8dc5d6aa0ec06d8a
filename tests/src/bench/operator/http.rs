//! A few lines of HTTP/1.1 over `std::net` for the operator benchmark, so that what it measures
//! is the emulator and the operator, not a client library: keep-alive requests with whole
//! (`Content-Length`) answers, and a watch read as it streams (chunked, one JSON event per
//! line) with a read timeout so the caller can look at the clock between events.

use std::{
    fmt::Write as _,
    io::{ErrorKind, Read as _, Write as _},
    net::TcpStream,
    time::Duration,
};

use anyhow::{Context as _, Result, bail, ensure};
use serde_json::Value;

use crate::kube::Emulator;

/// One keep-alive connection to the emulator.
#[derive(Debug)]
pub struct Conn {
    stream: TcpStream,
    host: String,
    token: Option<String>,
    /// Bytes read but not consumed yet.
    buf: Vec<u8>,
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

impl Conn {
    /// Connect to `emu`.
    ///
    /// # Errors
    /// The connection fails.
    pub fn open(emu: &Emulator) -> Result<Self> {
        let host = emu.url().trim_start_matches("http://").to_owned();
        let stream = TcpStream::connect(&host).with_context(|| format!("connect to {host}"))?;
        stream.set_nodelay(true)?;
        Ok(Self {
            stream,
            host,
            token: emu.token().map(str::to_owned),
            buf: Vec::new(),
        })
    }

    fn send(&mut self, method: &str, path: &str, body: Option<&[u8]>) -> Result<()> {
        let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {}\r\n", self.host);
        if let Some(token) = &self.token {
            let _ = write!(head, "Authorization: Bearer {token}\r\n");
        }
        if let Some(body) = body {
            let _ = write!(
                head,
                "Content-Type: application/merge-patch+json\r\nContent-Length: {}\r\n",
                body.len()
            );
        }
        head.push_str("\r\n");
        self.stream.write_all(head.as_bytes())?;
        if let Some(body) = body {
            self.stream.write_all(body)?;
        }
        Ok(())
    }

    /// Read more bytes; false on a read timeout.
    fn fill(&mut self) -> Result<bool> {
        let mut chunk = [0u8; 16 * 1024];
        match self.stream.read(&mut chunk) {
            Ok(0) => bail!("the emulator closed the connection"),
            Ok(n) => {
                self.buf.extend_from_slice(&chunk[..n]);
                Ok(true)
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// The status code and headers (lower-cased names) of the next answer.
    fn head(&mut self) -> Result<(u16, Vec<(String, String)>)> {
        let end = loop {
            if let Some(end) = find(&self.buf, b"\r\n\r\n") {
                break end;
            }
            self.fill()?;
        };
        let text = String::from_utf8_lossy(&self.buf[..end]).into_owned();
        self.buf.drain(..end + 4);
        let mut lines = text.lines();
        let status = lines.next().unwrap_or_default();
        let code = status
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .with_context(|| format!("not an HTTP status line: {status:?}"))?;
        let headers = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
            .collect();
        Ok((code, headers))
    }

    /// One request; the status code and the whole body.
    ///
    /// # Errors
    /// The connection fails, or the answer is not a whole body.
    pub fn request(
        &mut self,
        method: &str,
        path: &str,
        body: Option<&[u8]>,
    ) -> Result<(u16, Vec<u8>)> {
        self.send(method, path, body)?;
        let (code, headers) = self.head()?;
        let length: usize = headers
            .iter()
            .find(|(k, _)| k == "content-length")
            .and_then(|(_, v)| v.parse().ok())
            .with_context(|| format!("{method} {path}: no Content-Length"))?;
        while self.buf.len() < length {
            self.fill()?;
        }
        let body = self.buf.drain(..length).collect();
        Ok((code, body))
    }

    /// Start a watch at `path` (which carries `watch=true`); read its events with
    /// [`Conn::next_event`].
    ///
    /// # Errors
    /// The request fails or is not answered with a chunked 200.
    pub fn watch(&mut self, path: &str, timeout: Duration) -> Result<()> {
        self.send("GET", path, None)?;
        let (code, headers) = self.head()?;
        ensure!(code == 200, "watch {path} answered {code}");
        ensure!(
            headers
                .iter()
                .any(|(k, v)| k == "transfer-encoding" && v == "chunked"),
            "watch {path} is not chunked"
        );
        self.stream.set_read_timeout(Some(timeout))?;
        Ok(())
    }

    /// The next watch event, or `None` when none came within the read timeout.
    ///
    /// # Errors
    /// The stream ends or breaks, or a line is not JSON.
    pub fn next_event(&mut self) -> Result<Option<Value>> {
        // Chunks are decoded in place: `buf` holds raw chunked bytes; a line may span chunks.
        loop {
            if let Some(line) = self.decoded_line()? {
                return serde_json::from_slice(&line)
                    .map(Some)
                    .context("a watch line");
            }
            if !self.fill()? {
                return Ok(None);
            }
        }
    }

    /// Take one whole line out of the complete chunks at the front of `buf`, if there is one.
    fn decoded_line(&mut self) -> Result<Option<Vec<u8>>> {
        let mut data = Vec::new();
        let mut at = 0;
        loop {
            let Some(eol) = find(&self.buf[at..], b"\r\n") else {
                return Ok(None);
            };
            let size_text = String::from_utf8_lossy(&self.buf[at..at + eol]).into_owned();
            let size = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)
                .with_context(|| format!("not a chunk size: {size_text:?}"))?;
            ensure!(size > 0, "the watch ended");
            let start = at + eol + 2;
            if self.buf.len() < start + size + 2 {
                return Ok(None);
            }
            data.extend_from_slice(&self.buf[start..start + size]);
            at = start + size + 2;
            if let Some(newline) = data.iter().position(|b| *b == b'\n') {
                // Keep what follows the line: re-frame it as one chunk in front of the rest.
                let rest = data.split_off(newline + 1);
                data.pop();
                let mut tail = Vec::new();
                if !rest.is_empty() {
                    tail.extend_from_slice(format!("{:x}\r\n", rest.len()).as_bytes());
                    tail.extend_from_slice(&rest);
                    tail.extend_from_slice(b"\r\n");
                }
                tail.extend_from_slice(&self.buf[at..]);
                self.buf = tail;
                return Ok(Some(data));
            }
        }
    }
}
