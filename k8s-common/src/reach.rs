//! Whether the client can talk to the API server, judged from every answer it gets: a tower
//! layer ([`Watched`]) on the client's service stack records each request's outcome in an
//! [`ApiReach`], which `/healthz` asks ([`ApiReach::problem`]). The server is unreachable after
//! a transport failure until the next answer; the credential is rejected after a 401 until the
//! next other answer; a verb on a resource is denied after a 403 until that verb on that
//! resource is answered otherwise. Each change of state is logged once (an error with the
//! credential and the fix, or the recovery at info), so a caller retrying every few seconds
//! need not log each failure again. It owns no retry policy: callers still decide.

use std::{
    collections::BTreeMap,
    pin::Pin,
    sync::{Arc, Mutex, PoisonError},
    task::{Context, Poll},
};

use http::{Request, Response};
use tracing::{error, info, warn};

use crate::access::{Refusal, Target};

#[derive(Debug, Default)]
struct State {
    /// No answer yet since the start.
    answered: bool,
    /// The transport failure since the last answer.
    unreachable: Option<String>,
    /// A 401 since the last other answer.
    unauthorized: Option<Refusal>,
    /// 403s by target, until that target is answered otherwise.
    denied: BTreeMap<Target, Refusal>,
    /// Resources a side task uses (logged when denied, but not a health problem).
    side: &'static [&'static str],
}

/// The API server's reachability as the client sees it; cheap to clone (shared).
#[derive(Clone, Debug)]
pub struct ApiReach {
    url: String,
    hint: &'static str,
    state: Arc<Mutex<State>>,
}

impl ApiReach {
    /// For the API server at `url`; `hint` is appended to a 403's fix (where the program's RBAC
    /// is).
    #[must_use]
    pub fn new(url: &str, hint: &'static str) -> Self {
        Self {
            url: url.to_owned(),
            hint,
            state: Arc::default(),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Resources whose 403s are logged but are no [`Self::problem`]: what a side task needs
    /// (the identity garbage collection), which a liveness probe restarting the whole program
    /// over would take the rest down with it, and a restart would not mend.
    pub fn set_side_resources(&self, resources: &'static [&'static str]) {
        self.state().side = resources;
    }

    /// Why the API server cannot be used right now; `None` when its last answers were fine.
    #[must_use]
    pub fn problem(&self) -> Option<String> {
        let state = self.state();
        if let Some(reason) = &state.unreachable {
            return Some(reason.clone());
        }
        if let Some(refusal) = &state.unauthorized {
            return Some(refusal.to_string());
        }
        if let Some(refusal) = state
            .denied
            .iter()
            .find(|(target, _)| !state.side.contains(&target.resource.as_str()))
            .map(|(_, refusal)| refusal)
        {
            return Some(refusal.to_string());
        }
        (!state.answered).then(|| format!("no answer yet from the API server at {}", self.url))
    }

    /// Record a request to `target` answered with `code`.
    pub fn answered(&self, target: Option<&Target>, code: u16) {
        let mut state = self.state();
        state.answered = true;
        if state.unreachable.take().is_some() {
            info!(url = %self.url, "the API server answers again");
        }
        if code == 401 {
            if state.unauthorized.is_none() {
                let refusal = Refusal::of_status(401, "", "", "", self.hint);
                if let Some(refusal) = &refusal {
                    error!("{refusal}");
                }
                state.unauthorized = refusal;
            }
            return;
        }
        if state.unauthorized.take().is_some() {
            info!("the API server accepts the credential again");
        }
        let Some(target) = target else { return };
        if code == 403 {
            if !state.denied.contains_key(target)
                && let Some(refusal) =
                    Refusal::of_status(403, target.verb, &target.resource, &target.group, self.hint)
            {
                error!("{refusal}");
                state.denied.insert(target.clone(), refusal);
            }
        } else if state.denied.remove(target).is_some() {
            info!(verb = target.verb, resource = %target.resource, "permission granted now");
        }
    }

    /// Record a request that got no answer (`reason`: the transport error, with its chain).
    pub fn failed(&self, reason: &str) {
        let mut state = self.state();
        if state.unreachable.is_none() {
            let text = format!("cannot reach the API server at {}: {reason}", self.url);
            warn!("{text}; retrying");
            state.unreachable = Some(text);
        }
    }
}

/// The client service wrapped with [`ApiReach`] recording.
#[derive(Clone, Debug)]
pub struct Watched<S> {
    inner: S,
    reach: ApiReach,
}

impl<S> Watched<S> {
    /// Wrap `inner`, recording into `reach`.
    pub const fn new(inner: S, reach: ApiReach) -> Self {
        Self { inner, reach }
    }
}

impl<S, ReqBody, ResBody> tower::Service<Request<ReqBody>> for Watched<S>
where
    S: tower::Service<Request<ReqBody>, Response = Response<ResBody>>,
    S::Future: Send + 'static,
    S::Error: AsRef<dyn std::error::Error + Send + Sync + 'static> + 'static,
    ResBody: 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        let target = Target::of(request.method(), request.uri());
        let reach = self.reach.clone();
        let answer = self.inner.call(request);
        Box::pin(async move {
            let answer = answer.await;
            match &answer {
                Ok(response) => reach.answered(target.as_ref(), response.status().as_u16()),
                Err(e) => reach.failed(&crate::error::chain(e.as_ref())),
            }
            answer
        })
    }
}

#[cfg(test)]
mod tests {
    use http::{Method, Uri};

    use super::*;

    fn target(verb: &Method, uri: &str) -> Target {
        let uri: Uri = uri.parse().expect("uri");
        Target::of(verb, &uri).expect("a resource")
    }

    #[test]
    fn each_state_lasts_until_an_answer_clears_it() {
        let reach = ApiReach::new("https://10.0.0.1:6443", "");
        assert!(
            reach
                .problem()
                .expect("no answer yet")
                .contains("no answer yet")
        );
        reach.failed("tcp connect error: Connection refused");
        assert_eq!(
            reach.problem().as_deref(),
            Some(
                "cannot reach the API server at https://10.0.0.1:6443: tcp connect error: \
                 Connection refused"
            )
        );
        reach.answered(None, 401);
        assert!(reach.problem().expect("401").contains("401 Unauthorized"));
        let leases = target(
            &Method::GET,
            "/apis/coordination.k8s.io/v1/namespaces/x/leases/l",
        );
        reach.answered(Some(&leases), 403);
        let problem = reach.problem().expect("403");
        assert!(problem.contains("refused to get leases"), "{problem}");
        let nodes = target(&Method::GET, "/api/v1/nodes");
        reach.answered(Some(&nodes), 200);
        assert!(
            reach.problem().is_some(),
            "another resource's answer clears no 403"
        );
        reach.answered(Some(&leases), 404);
        assert_eq!(reach.problem(), None);
    }

    #[test]
    fn a_side_task_s_denied_resource_is_logged_but_no_problem() {
        let reach = ApiReach::new("https://10.0.0.1:6443", "");
        reach.set_side_resources(&["ciliumidentities"]);
        let identities = target(&Method::DELETE, "/apis/cilium.io/v2/ciliumidentities/1234");
        reach.answered(Some(&identities), 403);
        assert_eq!(reach.problem(), None);
        let leases = target(
            &Method::GET,
            "/apis/coordination.k8s.io/v1/namespaces/x/leases/l",
        );
        reach.answered(Some(&leases), 403);
        assert!(reach.problem().is_some_and(|p| p.contains("leases")));
    }
}
