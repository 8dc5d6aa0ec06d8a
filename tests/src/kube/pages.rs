//! List pagination (`?limit=` and `?continue=`): the first page of a list takes a snapshot of
//! the whole result and hands out an opaque continue token for the rest, so every page is
//! consistent with the first one's resourceVersion, as etcd's paged reads are. A bounded number
//! of snapshots is kept; an evicted or unknown token is answered 410 Expired, as the real
//! server answers a token older than the compaction window.

use std::collections::VecDeque;

use super::{status::ApiError, store::Obj};

/// How many unfinished lists are remembered.
const KEPT: usize = 64;

/// One page of a list.
#[derive(Debug)]
pub struct ListPage {
    /// Its objects.
    pub items: Vec<Obj>,
    /// The resourceVersion the whole list is consistent with.
    pub rv: u64,
    /// Token for the next page, if there is one.
    pub continue_token: Option<String>,
    /// How many objects the later pages hold.
    pub remaining: usize,
}

#[derive(Debug)]
struct Rest {
    token: String,
    plural: String,
    items: Vec<Obj>,
    rv: u64,
}

/// Unfinished lists.
#[derive(Debug, Default)]
pub struct Pages {
    seq: u64,
    rest: VecDeque<Rest>,
}

impl Pages {
    /// The first page of `items` (a list of `plural` at `rv`), at most `limit` long.
    pub fn first(
        &mut self,
        plural: &str,
        items: Vec<Obj>,
        rv: u64,
        limit: Option<usize>,
    ) -> ListPage {
        self.cut(plural, items, rv, limit)
    }

    /// The page after the one that handed out `token`.
    ///
    /// # Errors
    /// Expired for an unknown or evicted token; BadRequest for a token of another type.
    pub fn next(
        &mut self,
        plural: &str,
        token: &str,
        limit: Option<usize>,
    ) -> Result<ListPage, ApiError> {
        let index = self
            .rest
            .iter()
            .position(|r| r.token == token)
            .ok_or_else(|| ApiError::Expired {
                message: "The provided continue parameter is too old to display a consistent list \
                      result. You can start a new list without the continue parameter."
                    .to_owned(),
            })?;
        let rest = self.rest.remove(index).expect("index from position");
        if rest.plural != plural {
            return Err(ApiError::BadRequest {
                message: format!("continue token of {} used to list {plural}", rest.plural),
            });
        }
        Ok(self.cut(plural, rest.items, rest.rv, limit))
    }

    fn cut(
        &mut self,
        plural: &str,
        mut items: Vec<Obj>,
        rv: u64,
        limit: Option<usize>,
    ) -> ListPage {
        let Some(limit) = limit.filter(|l| *l > 0 && *l < items.len()) else {
            return ListPage {
                items,
                rv,
                continue_token: None,
                remaining: 0,
            };
        };
        let later = items.split_off(limit);
        self.seq += 1;
        let token = format!("weft-emulator-continue-{rv}-{}", self.seq);
        let remaining = later.len();
        self.rest.push_back(Rest {
            token: token.clone(),
            plural: plural.to_owned(),
            items: later,
            rv,
        });
        while self.rest.len() > KEPT {
            self.rest.pop_front();
        }
        ListPage {
            items,
            rv,
            continue_token: Some(token),
            remaining,
        }
    }
}
