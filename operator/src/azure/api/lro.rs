//! Completing a long-running PUT (§3.2, the Go SDK's pollers): 200/201 with a terminal
//! `provisioningState`, or with none and no status URL, are done (204 reads the resource); an `Azure-AsyncOperation`/`Operation-Location` URL
//! is polled until its `status` is `Succeeded`, `Failed` or `Canceled`, then the resource is
//! read; a `Location` URL alone is polled until it stops answering 202; a 201/202 without
//! any of these polls the resource until its `provisioningState` is terminal. Each poll waits
//! for the previous answer's `Retry-After`, else the configured interval, and the whole
//! operation is bounded by the configured timeout. A `Failed`/`Canceled` end is
//! [`ArmError::LroFailed`] with Azure's `error.code`/`message`.

use std::time::SystemTime;

use bytes::Bytes;
use http::{Method, StatusCode};
use serde::{Deserialize, de::DeserializeOwned};
use tokio::time::Instant;
use tracing::debug;

use super::{
    ArmClient, ArmError,
    request::{ErrorDetail, Op, decode},
    retry,
};
use crate::cloud::transport::Response;

#[derive(Debug, Default, Deserialize)]
struct OperationStatus {
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    error: Option<ErrorDetail>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct StateProps {
    #[serde(default)]
    provisioning_state: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct WithState {
    #[serde(default)]
    properties: Option<StateProps>,
}

fn provisioning_state(body: &[u8]) -> Option<String> {
    serde_json::from_slice::<WithState>(body)
        .ok()?
        .properties?
        .provisioning_state
}

enum State {
    Succeeded,
    Failed(String),
    Running,
}

fn classify(status: &str) -> State {
    match status.to_ascii_lowercase().as_str() {
        "succeeded" => State::Succeeded,
        "failed" | "canceled" | "cancelled" => State::Failed(status.to_owned()),
        _ => State::Running,
    }
}

fn failed(op: Op, status: String, error: Option<ErrorDetail>) -> ArmError {
    let error = error.unwrap_or_default();
    ArmError::LroFailed {
        operation: op.name,
        status,
        code: error.code.unwrap_or_default(),
        message: error.message.unwrap_or_default(),
    }
}

impl ArmClient {
    /// PUT `body` to `url` and return the resource once the operation has ended.
    pub(super) async fn put_lro<T: DeserializeOwned>(
        &self,
        op: Op,
        url: &str,
        body: Bytes,
    ) -> Result<T, ArmError> {
        let resp = self.send(op, Method::PUT, url, Some(body)).await?;
        let deadline = Instant::now() + self.inner.settings.lro_timeout;
        let status_url = resp
            .header("azure-asyncoperation")
            .or_else(|| resp.header("operation-location"))
            .map(str::to_owned);
        let location = resp.header("location").map(str::to_owned);
        let state = provisioning_state(&resp.body);
        // With a status URL only a terminal state ends it at once (the SDK's async poller
        // starts InProgress when the body has no state); without one, no state ends it too.
        let done = match state.as_deref().map(classify) {
            Some(State::Running) => false,
            None => status_url.is_none(),
            Some(_) => true,
        };
        match resp.status {
            StatusCode::NO_CONTENT => return self.get(op, url).await,
            StatusCode::OK | StatusCode::CREATED if done => {
                if let Some(State::Failed(status)) = state.as_deref().map(classify) {
                    return Err(failed(op, status, None));
                }
                return decode(op.name, &resp.body);
            }
            _ => {}
        }
        debug!(
            operation = op.name,
            status = resp.status.as_u16(),
            "polling a long-running operation"
        );
        if let Some(status_url) = status_url {
            self.poll_status(op, &status_url, &resp, deadline).await?;
            return self.get(op, url).await;
        }
        if let (StatusCode::ACCEPTED, Some(location)) = (resp.status, location) {
            let last = self.poll_location(op, &location, &resp, deadline).await?;
            if last.status != StatusCode::NO_CONTENT && !last.body.is_empty() {
                return decode(op.name, &last.body);
            }
            return self.get(op, url).await;
        }
        self.poll_resource(op, url, &resp, deadline).await
    }

    async fn wait(&self, op: Op, previous: &Response, deadline: Instant) -> Result<(), ArmError> {
        let wait = retry::retry_after(&previous.headers, SystemTime::now())
            .unwrap_or(self.inner.settings.poll_interval);
        if Instant::now() + wait > deadline {
            return Err(ArmError::LroTimeout {
                operation: op.name,
                after: self.inner.settings.lro_timeout,
            });
        }
        tokio::time::sleep(wait).await;
        Ok(())
    }

    async fn poll_status(
        &self,
        op: Op,
        status_url: &str,
        first: &Response,
        deadline: Instant,
    ) -> Result<(), ArmError> {
        let mut previous = first.clone();
        loop {
            self.wait(op, &previous, deadline).await?;
            let resp = self.exchange(op, Method::GET, status_url, None).await?;
            let body: OperationStatus = decode(op.name, &resp.body)?;
            match classify(body.status.as_deref().unwrap_or_default()) {
                State::Succeeded => return Ok(()),
                State::Failed(status) => return Err(failed(op, status, body.error)),
                State::Running => previous = resp,
            }
        }
    }

    async fn poll_location(
        &self,
        op: Op,
        location: &str,
        first: &Response,
        deadline: Instant,
    ) -> Result<Response, ArmError> {
        let mut previous = first.clone();
        loop {
            self.wait(op, &previous, deadline).await?;
            let resp = self.exchange(op, Method::GET, location, None).await?;
            if resp.status != StatusCode::ACCEPTED {
                return Ok(resp);
            }
            previous = resp;
        }
    }

    async fn poll_resource<T: DeserializeOwned>(
        &self,
        op: Op,
        url: &str,
        first: &Response,
        deadline: Instant,
    ) -> Result<T, ArmError> {
        let mut previous = first.clone();
        loop {
            self.wait(op, &previous, deadline).await?;
            let resp = self.exchange(op, Method::GET, url, None).await?;
            match provisioning_state(&resp.body).as_deref().map(classify) {
                None | Some(State::Succeeded) => return decode(op.name, &resp.body),
                Some(State::Failed(status)) => return Err(failed(op, status, None)),
                Some(State::Running) => previous = resp,
            }
        }
    }
}
