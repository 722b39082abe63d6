//! The cluster seen from outside, without joining it: the tree of every live node.

use std::time::Duration;

use super::config::{ClusterConfig, ClusterError, Names, check_name, connect};
use super::members::Members;
use super::wire;

/// One actor as a node's tree lists it to the cluster.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RemoteActor {
    /// Its path.
    pub path: String,
    /// Its incarnation.
    pub incarnation: u64,
    /// The module it runs.
    pub module: Option<String>,
    /// Messages waiting in its mailbox.
    pub mailbox_depth: usize,
}

/// The actors of every live node of the cluster `config.name`, by node, asked from outside
/// (without joining): the nodes are those heard within one heartbeat and a half.
pub async fn cluster_tree(
    config: &ClusterConfig,
) -> Result<Vec<(String, Vec<RemoteActor>)>, ClusterError> {
    check_name("cluster", &config.name)?;
    let names = Names::new(&config.name);
    let client = connect(config, "mote-cli".to_owned()).await?;
    let mut beats = client
        .subscribe(names.heartbeats())
        .await
        .map_err(|e| ClusterError::jetstream("subscribing to heartbeats", e))?;
    let members = Members::default();
    members.listen(&mut beats, config.heartbeat, None).await?;
    let mut out = Vec::new();
    for node in members.names() {
        let reply = tokio::time::timeout(
            Duration::from_secs(5),
            client.request(names.control(&node), Vec::new().into()),
        )
        .await;
        let Ok(Ok(reply)) = reply else {
            return Err(ClusterError::NoAnswer(node));
        };
        let actors: Vec<RemoteActor> = wire::decode(&reply.payload)
            .map_err(|e| ClusterError::jetstream("reading a node's tree", e))?;
        out.push((node, actors));
    }
    Ok(out)
}
