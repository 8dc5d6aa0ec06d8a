//! An ENI is deleted only after two rounds that saw it detached with the tags.

use super::*;

#[test]
fn the_default_tags_name_the_cluster_and_given_tags_win() {
    assert_eq!(
        gc_tags(&BTreeMap::new(), "prod"),
        BTreeMap::from([
            (MANAGED_TAG.to_owned(), "true".to_owned()),
            (CLUSTER_TAG.to_owned(), "prod".to_owned()),
        ])
    );
    let given = BTreeMap::from([("team".to_owned(), "net".to_owned())]);
    assert_eq!(gc_tags(&given, "prod"), given);
}
