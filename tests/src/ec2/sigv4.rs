//! SigV4 signatures checked the way AWS computes them, for requests signed with a key whose
//! secret the emulator knows (the scenario's `secretKeys`, and every key STS or IMDS issued):
//! the canonical request (method, path, the query re-encoded and sorted, the signed headers
//! lowercased and trimmed, the payload's SHA-256), the string to sign over `X-Amz-Date` and the
//! credential scope, and the HMAC-SHA256 key chain from `AWS4<secret>`. A mismatch answers 403
//! `SignatureDoesNotMatch` with the canonical request, as AWS does. Keys without a known secret
//! are not verified. Knows nothing of the model.

use std::fmt::Write as _;

use hyper::HeaderMap;
use ring::{digest, hmac};

use super::{auth::Credential, error::Ec2Error};

/// What a signature covers.
#[derive(Debug)]
pub struct Signed<'a> {
    /// `POST`, `GET`.
    pub method: &'a str,
    /// The path as sent.
    pub path: &'a str,
    /// The query string as sent.
    pub query: &'a str,
    /// Every header.
    pub headers: &'a HeaderMap,
    /// The body.
    pub body: &'a [u8],
}

fn hex(bytes: &[u8]) -> String {
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

fn sha256_hex(bytes: &[u8]) -> String {
    hex(digest::digest(&digest::SHA256, bytes).as_ref())
}

fn hmac(key: &[u8], data: &[u8]) -> Vec<u8> {
    hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, key), data)
        .as_ref()
        .to_vec()
}

/// RFC 3986 encoding as SigV4 wants it (unreserved characters kept, the rest `%XX`).
fn uri_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// The canonical request.
#[must_use]
pub fn canonical_request(req: &Signed, signed_headers: &[String]) -> String {
    let mut query: Vec<(String, String)> = form_urlencoded::parse(req.query.as_bytes())
        .map(|(k, v)| (uri_encode(&k), uri_encode(&v)))
        .collect();
    query.sort();
    let query = query
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("&");
    let mut headers = String::new();
    for name in signed_headers {
        let values: Vec<String> = req
            .headers
            .get_all(name.as_str())
            .iter()
            .map(|v| {
                String::from_utf8_lossy(v.as_bytes())
                    .split_whitespace()
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect();
        let _ = writeln!(headers, "{name}:{}", values.join(","));
    }
    let payload = req
        .headers
        .get("x-amz-content-sha256")
        .and_then(|v| v.to_str().ok())
        .map_or_else(|| sha256_hex(req.body), str::to_owned);
    let path = if req.path.is_empty() { "/" } else { req.path };
    format!(
        "{}\n{path}\n{query}\n{headers}\n{}\n{payload}",
        req.method,
        signed_headers.join(";")
    )
}

/// Check `credential`'s signature of `req` with `secret`.
///
/// # Errors
/// 403 `SignatureDoesNotMatch`; 400 `MissingParameter` without `X-Amz-Date`.
pub fn verify(credential: &Credential, secret: &str, req: &Signed) -> Result<(), Ec2Error> {
    let amz_date = req
        .headers
        .get("x-amz-date")
        .and_then(|v| v.to_str().ok())
        .ok_or_else(|| Ec2Error::missing("X-Amz-Date"))?;
    let canonical = canonical_request(req, &credential.signed_headers);
    let scope = format!(
        "{}/{}/{}/aws4_request",
        credential.date, credential.region, credential.service
    );
    let to_sign = format!(
        "AWS4-HMAC-SHA256\n{amz_date}\n{scope}\n{}",
        sha256_hex(canonical.as_bytes())
    );
    let mut key = hmac(
        format!("AWS4{secret}").as_bytes(),
        credential.date.as_bytes(),
    );
    for part in [
        credential.region.as_str(),
        credential.service.as_str(),
        "aws4_request",
    ] {
        key = hmac(&key, part.as_bytes());
    }
    let expected = hex(&hmac(&key, to_sign.as_bytes()));
    if expected == credential.signature {
        return Ok(());
    }
    Err(Ec2Error::new(
        403,
        "SignatureDoesNotMatch",
        format!(
            "The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method. Consult the service documentation for details.\n\nThe Canonical String for this request should have been\n'{canonical}'\n\nThe String-to-Sign should have been\n'{to_sign}'\n"
        ),
    ))
}

#[cfg(test)]
mod tests {
    use hyper::header::HeaderValue;

    use super::*;
    use crate::ec2::auth;

    /// AWS's published example "get-vanilla-query-order-key-case" of the SigV4 test suite
    /// (`GET /?Param2=value2&Param1=value1`, service `service`, region `us-east-1`, key
    /// `AKIDEXAMPLE`, secret `wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY`, 2015-08-30T12:36:00Z).
    #[test]
    fn verifies_awss_published_vector() {
        let mut headers = HeaderMap::new();
        headers.insert("host", HeaderValue::from_static("example.amazonaws.com"));
        headers.insert("x-amz-date", HeaderValue::from_static("20150830T123600Z"));
        let req = Signed {
            method: "GET",
            path: "/",
            query: "Param2=value2&Param1=value1",
            headers: &headers,
            body: b"",
        };
        let header = "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, SignedHeaders=host;x-amz-date, Signature=b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500";
        let credential = auth::parse(Some(header)).expect("parses");
        let secret = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";
        verify(&credential, secret, &req).expect("AWS's own vector verifies");
        let tampered = Signed {
            query: "Param2=value2&Param1=value9",
            ..req
        };
        let e = verify(&credential, secret, &tampered).expect_err("a changed query fails");
        assert_eq!((e.status, e.code.as_str()), (403, "SignatureDoesNotMatch"));
    }
}
